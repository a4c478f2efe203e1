package delivery

import (
	"context"
	"time"

	"github.com/lavender-ml/lavender/internal/backoff"
	"github.com/lavender-ml/lavender/notify"
)

// Retry is the pipeline's retry stage, in the shape of Alertmanager's: a
// push that failed in a way that may pass (a 5xx, 429, timeout, reset) is
// tried again after a doubling wait, within the push's own timeout. A
// target that was not reached at all (refused, unknown host, TLS) is not
// tried again in the same call: the next push would fail alike, and the
// producer's own retry (the watchdog's rules, Alertmanager's) tries later.
type Retry struct {
	First time.Duration // the wait after the first failure
	Max   time.Duration // the longest wait
	Tries int           // at most, the first included
	// Off sends each push once: for a test of what the producer's own
	// retry does, such as Alertmanager's resend of a group.
	Off bool
}

// DefaultRetry suits the 5 s default timeout: four tries at most, with
// waits of 250 ms, 500 ms and 1 s between them, as many as fit.
var DefaultRetry = Retry{First: 250 * time.Millisecond, Max: 2 * time.Second, Tries: 4}

func (r Retry) withDefaults() Retry {
	if r.First <= 0 {
		r.First = DefaultRetry.First
	}
	if r.Max <= 0 {
		r.Max = max(DefaultRetry.Max, r.First)
	}
	if r.Tries <= 0 {
		r.Tries = DefaultRetry.Tries
	}
	return r
}

// notify pushes m to n until n accepts it, fails in a way another try
// cannot mend, has been tried Tries times, or the next wait would take
// more than half of what is left of ctx's time (the other half is the next
// try's). It returns the last failure, nil once accepted; tried is called
// after each try with its time, retried before each wait.
func (r Retry) notify(ctx context.Context, n notify.Notifier, m notify.Message, tried func(time.Duration), retried func(*notify.Error)) *notify.Error {
	var wait time.Duration
	for try := 1; ; try++ {
		start := time.Now()
		retry, err := n.Notify(ctx, m)
		tried(time.Since(start))
		if err == nil {
			return nil
		}
		pe := notify.AsError(err)
		if r.Off || !retry || pe.Unreachable || try >= r.Tries {
			return pe
		}
		wait = backoff.Next(wait, r.First, r.Max)
		if deadline, ok := ctx.Deadline(); !ok || time.Until(deadline) < 2*wait {
			return pe
		}
		retried(pe)
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return pe
		}
	}
}
