package delivery

import (
	"container/list"
	"slices"
	"strconv"
	"time"
)

// dedupSaved is one remembered (target, alert) as the state file keeps it.
type dedupSaved struct {
	Target   string    `json:"target"` // the target's Identity
	Incident string    `json:"incident,omitempty"`
	Status   string    `json:"status"`
	Expires  time.Time `json:"expires"`

	// What lavender 0.3 kept of an Alertmanager alert instead of Incident,
	// read so that an upgrade keeps its dedup memory.
	Fingerprint string `json:"fingerprint,omitempty"`
	StartsAt    int64  `json:"starts_at,omitempty"` // unix nanoseconds
}

func (s dedupSaved) key() dedupKey {
	incident := s.Incident
	if incident == "" && s.Fingerprint != "" {
		incident = AlertIncident(s.Fingerprint, s.StartsAt)
	}
	return dedupKey{target: s.Target, alert: Key{Incident: incident, Status: s.Status}}
}

// AlertIncident is the Key.Incident of an Alertmanager alert: its
// fingerprint and its start, which every copy of one incident shares.
func AlertIncident(fingerprint string, startsAtNanos int64) string {
	return fingerprint + "@" + strconv.FormatInt(startsAtNanos, 10)
}

// snapshot is what the dedup memory holds at now: the pushes targets
// accepted (and the alerts storm control held), oldest first. Pushes still
// in flight are left out; their own save follows once they finish.
func (d *dedup) snapshot(now time.Time) []dedupSaved {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.prune(now)
	out := make([]dedupSaved, 0, len(d.entries))
	for f := d.order.Front(); f != nil; f = f.Next() {
		e := f.Value.(*dedupEntry)
		select {
		case <-e.done:
		default:
			continue
		}
		if !e.ok {
			continue
		}
		out = append(out, dedupSaved{Target: e.key.target, Incident: e.key.alert.Incident, Status: e.key.alert.Status, Expires: e.expires})
	}
	return out
}

// restore adds saved entries that have not expired at now, keeping their
// expiry, except that none outlives a window from now (a window made
// shorter since they were saved takes effect). Entries it knows already
// are kept as they are. The memory stays in expiry order and within its
// cap, the soonest to expire going first.
func (d *dedup) restore(saved []dedupSaved, now time.Time) (added int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.prune(now)
	var all []*dedupEntry
	for f := d.order.Front(); f != nil; f = f.Next() {
		all = append(all, f.Value.(*dedupEntry))
	}
	latest := now.Add(d.window)
	for _, s := range saved {
		k := s.key()
		if !s.Expires.After(now) || d.entries[k] != nil {
			continue
		}
		e := &dedupEntry{key: k, expires: s.Expires, done: make(chan struct{}), ok: true}
		if e.expires.After(latest) {
			e.expires = latest
		}
		close(e.done)
		d.entries[k] = e
		all = append(all, e)
		added++
	}
	slices.SortStableFunc(all, func(a, b *dedupEntry) int { return a.expires.Compare(b.expires) })
	d.order = list.New()
	for _, e := range all {
		e.elem = d.order.PushBack(e)
	}
	for d.order.Len() > d.max {
		d.remove(d.order.Front().Value.(*dedupEntry))
		added--
	}
	return max(added, 0)
}
