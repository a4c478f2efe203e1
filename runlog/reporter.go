package runlog

import (
	"sync"
	"time"
)

// DefaultReportEvery is how often an ErrorReporter lets a failure through.
const DefaultReportEvery = time.Minute

// WriteErrorsMetric and WriteErrorsHelp name the counter of failed writes
// to the logs dir. The bridge and the exporter each register one, told
// apart by a constant writer label, so both fit in serve's one registry.
const (
	WriteErrorsMetric = "lavender_runlog_write_errors_total"
	WriteErrorsHelp   = "Failed writes (and directory reads) of the logs dir: run-log entries and phase tables, by writer. The push or heartbeat itself went on."
)

// ErrorReporter rate-limits the logging of write failures in the logs dir.
// A disk that is full or read-only fails every append, and one log line per
// failure would flood the journal exactly when the host is in trouble; the
// caller counts every failure in a metric and logs only what Report lets
// through. The zero value logs at most once per DefaultReportEvery.
type ErrorReporter struct {
	Every time.Duration    // default DefaultReportEvery
	Now   func() time.Time // default time.Now

	mu         sync.Mutex
	last       time.Time
	suppressed uint64
}

// Report records one failure. It returns logIt true for the first failure
// and then for at most one per Every, with the number of failures held back
// since the last one it let through.
func (r *ErrorReporter) Report() (logIt bool, suppressed uint64) {
	every, now := r.Every, time.Now
	if every <= 0 {
		every = DefaultReportEvery
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
