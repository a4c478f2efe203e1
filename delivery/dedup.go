package delivery

import (
	"container/list"
	"sync"
	"time"

	"github.com/lavender-ml/lavender/notify"
)

// DefaultDedupMaxEntries caps the dedup memory. An entry is about 200 bytes,
// so the cap costs a few MB at most, and 10,000 (alert, target) pairs an
// hour is far beyond what a phone should receive.
const DefaultDedupMaxEntries = 10000

// Key identifies one notification of one incident: Alertmanager's retries
// and an HA peer's copy of the same group carry the same key.
type Key struct {
	Incident string // what every copy of the incident shares, e.g. an alert's fingerprint and start
	Status   string // "firing", "resolved": the resolution is a push of its own
}

type dedupKey struct {
	target string // Target.Identity(), so a reload that renumbers lines keeps memory
	alert  Key
}

type claimState int

const (
	claimNew     claimState = iota // the caller must push and then finish
	claimSent                      // a push was accepted within the window
	claimPending                   // another request is pushing it right now
)

// dedupEntry is one remembered (target, alert). done closes when the push
// that claimed it finishes; ok and err are valid after that.
type dedupEntry struct {
	key     dedupKey
	expires time.Time
	done    chan struct{}
	ok      bool
	err     *notify.Error
	elem    *list.Element
}

// dedup remembers accepted pushes for a window, in bounded memory. Pending
// entries make concurrent copies of a group (an HA pair sends both at once)
// wait for the first push instead of pushing twice.
type dedup struct {
	mu      sync.Mutex
	window  time.Duration
	max     int
	entries map[dedupKey]*dedupEntry
	order   *list.List // by claim time, so by expiry: the front goes first
}

func newDedup(window time.Duration, max int) *dedup {
	return &dedup{window: window, max: max, entries: make(map[dedupKey]*dedupEntry), order: list.New()}
}

// claim looks k up. For claimNew the caller owns the returned entry and must
// call finish; for claimPending it may wait on the entry's done channel.
func (d *dedup) claim(k dedupKey, now time.Time) (*dedupEntry, claimState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.prune(now)
	if e, ok := d.entries[k]; ok {
		select {
		case <-e.done:
			return e, claimSent // failed pushes are removed, so a finished entry was accepted
		default:
			return e, claimPending
		}
	}
	e := &dedupEntry{key: k, expires: now.Add(d.window), done: make(chan struct{})}
	e.elem = d.order.PushBack(e)
	d.entries[k] = e
	for d.order.Len() > d.max {
		d.remove(d.order.Front().Value.(*dedupEntry))
	}
	return e, claimNew
}

// finish records the outcome of a claimed push. A failure is forgotten at
// once, so the next delivery of the alert tries that target again.
func (d *dedup) finish(e *dedupEntry, err *notify.Error) {
	if e == nil { // a push without dedup
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	e.ok, e.err = err == nil, err
	if err != nil && d.entries[e.key] == e {
		d.remove(e)
	}
	close(e.done)
}

func (d *dedup) prune(now time.Time) {
	for f := d.order.Front(); f != nil; f = d.order.Front() {
		e := f.Value.(*dedupEntry)
		if e.expires.After(now) {
			return
		}
		d.remove(e)
	}
}

func (d *dedup) remove(e *dedupEntry) {
	if d.entries[e.key] == e {
		delete(d.entries, e.key)
	}
	if e.elem != nil {
		d.order.Remove(e.elem)
		e.elem = nil
	}
}

func (d *dedup) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.entries)
}

// DedupLen is how many pushes the dedup memory holds: bounded by
// DedupMaxEntries whatever the load.
func (b *Pipeline) DedupLen() int { return b.dedup.len() }
