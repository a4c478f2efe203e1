package delivery

import (
	"slices"

	"github.com/lavender-ml/lavender/notify"
)

// stormKeys are the storm budgets' keys of the targets configured now
// (one per phone: "phone alice", or a target's own file:line), and what a
// key is made of, so that alerts held under a key that a reload or a
// restart no longer finds can follow their target to its key now.
type stormKeys struct {
	order []string            // every key once, in load order
	ids   map[string][]string // key → the identities of its targets, in load order
	byID  map[string]string   // identity → the key of the first target that has it
	named map[string]bool     // keys of phones named by a PHONE= (phone=) setting
}

// stormTarget is one target as storm control keys it.
type stormTarget struct {
	key, id string
	named   bool // key is a phone's name, not the target's file:line
}

// keysOf are the storm keys of the notifiers of one load.
func keysOf(ns []notify.Notifier) stormKeys {
	ts := make([]stormTarget, len(ns))
	for i, n := range ns {
		ts[i] = stormTarget{key: n.Phone(), id: n.Identity(), named: n.Phone() != n.Name()}
	}
	return newStormKeys(ts)
}

// newStormKeys are the storm keys of ts, in their order.
func newStormKeys(ts []stormTarget) stormKeys {
	k := stormKeys{ids: make(map[string][]string), byID: make(map[string]string), named: make(map[string]bool)}
	for _, t := range ts {
		if _, ok := k.ids[t.key]; !ok {
			k.order = append(k.order, t.key)
		}
		k.ids[t.key] = append(k.ids[t.key], t.id)
		if _, ok := k.byID[t.id]; !ok {
			k.byID[t.id] = t.key
		}
		if t.named {
			k.named[t.key] = true
		}
	}
	return k
}

// configured reports whether a target has identity id.
func (k stormKeys) configured(id string) bool {
	_, ok := k.byID[id]
	return ok
}

// follow returns the key that alerts held under key, whose targets had
// the identities ids, are held under now; "" when none of those targets
// is configured any more, and there is nowhere to send their summary.
// known reports whether a target with an identity was configured when
// they were held.
func (k stormKeys) follow(key string, ids []string, known func(id string) bool) string {
	// A phone the files name is the user's own name for it: with a target
	// added, removed or edited, it is the same phone.
	if k.named[key] {
		return key
	}
	// A target keeps its identity wherever its line moved (a comment added
	// above it, a PHONE= setting that now names it).
	for _, id := range ids {
		if to, ok := k.byID[id]; ok {
			return to
		}
	}
	// A line edited in place (its URL fixed) is the same target, unless
	// the one there now is another target that moved up into the line.
	if now, ok := k.ids[key]; ok && !slices.ContainsFunc(now, known) {
		return key
	}
	return ""
}
