package delivery

import (
	"slices"
	"sort"
	"time"
)

// stormSaved is one target's storm control as the state file keeps it:
// the pushes still in its window and the alerts it holds.
type stormSaved struct {
	Target   string `json:"target"`    // the key when saved: "phone alice", or file:line
	TargetID string `json:"target_id"` // the identity of the key's first target, all a file held before target_ids
	// TargetIDs are the identities of the key's targets (the first
	// maxSavedIDs): held alerts follow any of them to its key now.
	TargetIDs []string    `json:"target_ids,omitempty"`
	Sent      []time.Time `json:"sent,omitempty"`
	Held      []heldCount `json:"held,omitempty"`
	Others    int         `json:"others,omitempty"`
}

// maxSavedIDs bounds the identities saved for one key: held alerts need
// only one of its targets still configured to follow.
const maxSavedIDs = 64

// identities are the saved key's targets' identities, from a file of any
// version.
func (s stormSaved) identities() []string {
	if len(s.TargetIDs) > 0 {
		return s.TargetIDs
	}
	return []string{s.TargetID}
}

// heldCount is how many alerts of one kind a target holds.
type heldCount struct {
	StormEvent
	Count int `json:"count"`
}

// All hands out a summary for every target that holds alerts, whatever its
// window, and counts each as a push: at a stop, held alerts have no later
// minute to go out in.
func (l *stormLimiter) All(now time.Time) []stormSummary { return l.summaries(now, true) }

// requeue holds a summary's alerts again, after its push failed, so that
// they go out with the target's next summary, under the key a reload gave
// its target meanwhile. A target a reload removed meanwhile has nowhere to
// send them; they are dropped and counted.
func (l *stormLimiter) requeue(s stormSummary) (dropped int) {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	target := s.Target
	if to, ok := l.moved[target]; ok && s.loads+1 == l.loads {
		target = to // a reload came meanwhile; "": it removed the target
	}
	st := l.targets[target]
	if st == nil {
		if target == "" || !l.known[target] || len(l.targets) >= stormMaxTargets {
			return s.Held
		}
		st = &stormState{}
		l.targets[target] = st
	}
	st.holdAll(s.held, s.Others, s.restored)
	l.wakeRun()
	return 0
}

// snapshot is every target's window and held alerts, for the state file.
func (l *stormLimiter) snapshot(now time.Time) []stormSaved {
	if l == nil || l.max == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []stormSaved
	for target, st := range l.targets {
		st.prune(now, l.window)
		if len(st.sent) == 0 && st.heldTotal == 0 {
			continue
		}
		s := stormSaved{Target: target, Sent: slices.Clone(st.sent), Others: st.others}
		for e, n := range st.held {
			s.Held = append(s.Held, heldCount{e, n})
		}
		sort.Slice(s.Held, func(i, j int) bool { return s.Held[i].Count > s.Held[j].Count })
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// restore adds a saved target's window and held alerts to target's, as
// alerts held before a restart. Sent times in the future (a clock set
// back) are dropped, so that no slot stays taken longer than a window.
func (l *stormLimiter) restore(target string, s stormSaved, now time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.targets[target]
	if st == nil {
		if len(l.targets) >= stormMaxTargets {
			return
		}
		st = &stormState{}
		l.targets[target] = st
	}
	for _, t := range s.Sent {
		if !t.After(now) {
			st.sent = append(st.sent, t)
		}
	}
	slices.SortFunc(st.sent, func(a, b time.Time) int { return a.Compare(b) })
	if l.max > 0 && len(st.sent) > l.max {
		st.sent = st.sent[len(st.sent)-l.max:]
	}
	st.prune(now, l.window)
	before := st.heldTotal
	for _, h := range s.Held {
		st.holdN(h.StormEvent, h.Count)
	}
	st.heldTotal += s.Others
	st.others += s.Others
	st.restored += st.heldTotal - before
	if len(st.sent) == 0 && st.heldTotal == 0 {
		delete(l.targets, target)
	}
	if st.heldTotal > 0 {
		l.wakeRun()
	}
}

// holdN holds n alerts of kind e; a kind past stormMaxNames counts among
// the others.
func (st *stormState) holdN(e StormEvent, n int) {
	if n <= 0 {
		return
	}
	st.heldTotal += n
	if _, ok := st.held[e]; !ok && len(st.held) >= stormMaxNames {
		st.others += n
		return
	}
	if st.held == nil {
		st.held = make(map[StormEvent]int)
	}
	st.held[e] += n
}
