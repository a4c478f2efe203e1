package watchdog

import (
	"slices"
	"time"

	"github.com/lavender-ml/lavender/internal/backoff"
)

// outbox keeps a rule's one-off pushes (a phase's end, a loss gone NaN)
// until a target accepts them: unlike an episode there is no condition
// that lasts and re-fires, so a push that reached no phone is retried
// from here, with a doubling backoff, or it would be lost.
type outbox struct {
	repeat, retry time.Duration

	pending []Alert // pushes not yet delivered
	retryAt time.Time
	backoff time.Duration
}

// send queues fresh alerts and says what to push now: the fresh ones, or,
// without any, everything still pending once its retry is due. At a stop
// (the last poll) everything pending is tried once more: no retry follows.
func (o *outbox) send(fresh []Alert, now time.Time, stopping bool) []Alert {
	o.pending = append(o.pending, fresh...)
	if stopping {
		return slices.Clone(o.pending)
	}
	if len(fresh) > 0 {
		return fresh
	}
	if len(o.pending) > 0 && !now.Before(o.retryAt) {
		return slices.Clone(o.pending)
	}
	return nil
}

// pushed forgets the pending alert that is delivered, or schedules a
// retry of what is pending. The watchdog tells it once per alert, and a
// poll's alerts go out in one push: a retry already scheduled after now
// is that push's, so the backoff grows once per push, not once per alert
// it carried.
func (o *outbox) pushed(is func(Alert) bool, delivered bool, now time.Time) {
	i := slices.IndexFunc(o.pending, is)
	if i < 0 {
		return
	}
	if delivered {
		o.pending = slices.Delete(o.pending, i, i+1)
		if len(o.pending) == 0 {
			o.retryAt, o.backoff = time.Time{}, 0
		}
		return
	}
	if o.retryAt.After(now) {
		return
	}
	o.backoff = backoff.Next(o.backoff, o.retry, o.repeat)
	o.retryAt = now.Add(o.backoff)
}

// state: armed unless a push waits for a target; Since is when the oldest
// waiting push began.
func (o *outbox) state(name RuleName) RuleState {
	st := RuleState{Name: name, Armed: len(o.pending) == 0, Undelivered: len(o.pending) > 0}
	if len(o.pending) > 0 {
		st.Since = o.pending[0].Began
	}
	return st
}
