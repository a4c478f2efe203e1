// Package throttle keeps a repeating failure's log lines to one per
// interval, saying how many were held back. The exporter and the bridge use
// it for failed writes to the logs dir, which they also count in
// lavender_runlog_write_errors_total (the counter cmd/lavender wires).
package throttle

import (
	"sync"
	"time"
)

// DefaultEvery is how often a Reporter lets a failure through.
const DefaultEvery = time.Minute

// Reporter rate-limits the logging of a failure that repeats: a disk that
// is full or read-only fails every write to the logs dir, and one log line
// per failure would flood the journal exactly when the host is in trouble.
// The caller counts every failure in a metric and logs only what Report
// lets through. The zero value lets through at most one per DefaultEvery.
type Reporter struct {
	Every time.Duration    // default DefaultEvery
	Now   func() time.Time // default time.Now

	mu         sync.Mutex
	last       time.Time
	suppressed uint64
}

// Report records one failure. It returns logIt true for the first failure
// and then for at most one per Every, with the number of failures held back
// since the last one it let through.
func (r *Reporter) Report() (logIt bool, suppressed uint64) {
	every, now := r.Every, time.Now
	if every <= 0 {
		every = DefaultEvery
	}
	if r.Now != nil {
		now = r.Now
	}
	t := now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() && t.Sub(r.last) < every {
		r.suppressed++
		return false, 0
	}
	suppressed, r.suppressed, r.last = r.suppressed, 0, t
	return true, suppressed
}
