package watchdog

import (
	"time"

	"github.com/lavender-ml/lavender/internal/backoff"
	"github.com/lavender-ml/lavender/phaseapi"
)

// Rule is one condition the watchdog pushes for. It is a small state
// machine fed by the watchdog's poll: it owns its threshold, hysteresis,
// reminders and backoff, and knows neither Bark nor where the time comes
// from. The watchdog calls a rule from one goroutine at a time.
type Rule interface {
	// Name is the rule's name in alerts, metrics and logs: one of the
	// names of names.go.
	Name() RuleName
	// Observe reads one sample taken at now and returns what to push now,
	// if anything. A rule that returns a firing or reminder alert counts
	// it as sent at once (it disarms before the push leaves) and learns
	// the outcome from Pushed.
	Observe(s Sample, now time.Time) []Alert
	// Pushed tells the rule whether the push that carried a reached a
	// phone: delivered is true when a target accepted it, or when there
	// was no target to try. On false the rule retries with a backoff.
	Pushed(a Alert, delivered bool, now time.Time)
	// State is the rule's state for metrics and the status page.
	State() RuleState
}

// RuleState is what a rule shows of itself.
type RuleState struct {
	Name RuleName
	// Armed is true while the rule will push on the next crossing of its
	// threshold, false from its push until the incident ends.
	Armed bool
	// Since is when the current incident began; zero while armed.
	Since time.Time
	// Undelivered is true while a push of a current incident has reached
	// no phone yet (every target failed; it is retried): "pushed" would
	// tell the user the phone knows.
	Undelivered bool
}

// Status says what an Alert tells the phone.
type Status string

const (
	Firing   Status = "firing"   // an incident began (or its first push is retried)
	Reminder Status = "reminder" // an incident the phone already knows lasts
	Resolved Status = "resolved" // an incident the phone knows of ended
)

// Alert is what a rule wants pushed: the facts, not the text. The sender
// formats it with the same formatter as the webhook's alerts.
type Alert struct {
	Rule   RuleName
	Status Status
	// Incident tells apart the incidents of a rule that has several at
	// once: the phase for a phase rule, the filesystem and condition for
	// the disk-space rule; "" for a rule with one incident at a time.
	// With Rule and Began it names the incident, so a sender can give its
	// reminders and its resolution the notification of its first push.
	Incident string
	// Began is when the incident began: the same for its firing push, its
	// reminders and its resolution, so a sender can derive a stable
	// notification id from Rule and Began, and say how long it lasted.
	Began time.Time
	// At is the time of the poll that raised the alert.
	At time.Time
	// Sample is the reading that raised it (for a resolution: the one that
	// ended the incident).
	Sample Sample

	Kills  uint64 // oom: kills the push reports (since the last delivered oom push)
	Victim Victim // oom: the victim the kernel log named, if any
	Phase  string // oom: the active phase, "" if none; phase rules: the phase; gpu, disk: the phase hit; disk-space fill: the phase that needs longer than the disk lasts

	// End is, for failed and done, the end the push reports (the latest
	// of them when it counts several); Ends is how many it counts: more
	// than 1 for "failed 3 times in 10m", which spans Began to At.
	End  phaseapi.PhaseEnd
	Ends int

	// gpu, disk: the fault of the kernel log the push is about (the first
	// record of it), and for the push at the end of a window the repeats
	// it counts and how long the window lasted.
	Fault   KernelFault
	Repeats int
	Window  time.Duration

	Disk     Disk          // disk-space: the filesystem, as the poll read it
	DiskKind DiskKind      // disk-space: which of its conditions
	ETA      time.Duration // disk-space fill: how long Phase still needs
	MinFree  MinFree       // disk-space floor: the floor in force

	Stall StallKind // stalled: what the phase stopped on

	// gpu-lost, gpu-ecc, gpu-remap, gpu-hang, gpu-idle, gpu-slowdown:
	// the GPUs the incident is about, as the poll that raised it read
	// them; Phase names the phase they served, if one.
	GPU GPUFacts
}

// Lasted is how long the incident had lasted when the alert was raised.
func (a Alert) Lasted() time.Duration { return max(a.At.Sub(a.Began), 0) }

// episode is the state shared by the rules that page while a condition
// lasts (swap, pressure): one push when it begins, a reminder every repeat
// while it lasts, a retry with a doubling backoff while every target
// fails, and re-arming once the condition has clearly ended.
type episode struct {
	repeat time.Duration // reminder cadence; 0: none
	retry  time.Duration // first retry after a push no target accepted

	disarmed  bool          // a push of this incident has been attempted
	began     time.Time     // when this incident began
	delivered bool          // a push of this incident reached a phone
	lastSent  time.Time     // last push of this incident that reached Bark or had no target
	retryAt   time.Time     // after a push no target accepted: when to try again
	backoff   time.Duration // doubles while every push fails, up to repeat
}

// due reports whether a push should go out at now while the condition holds.
func (e *episode) due(now time.Time) bool {
	switch {
	case !e.retryAt.IsZero():
		return !now.Before(e.retryAt)
	case !e.disarmed:
		return true
	default:
		return e.repeat > 0 && !now.Before(e.lastSent.Add(e.repeat))
	}
}

// fire disarms before the push leaves, so that an armed gauge already
// reads 0 when the phone sees the push, and says what the push is.
func (e *episode) fire(now time.Time) Status {
	if !e.disarmed {
		e.disarmed, e.began = true, now
	}
	// Until an outcome arrives, count the push as sent: a rule whose
	// pushes are never reported does not push on every poll.
	e.lastSent = now
	if e.delivered {
		return Reminder
	}
	return Firing
}

// pushed records the outcome of the push fire announced.
func (e *episode) pushed(delivered bool, now time.Time) {
	if !e.disarmed {
		return // the incident ended meanwhile
	}
	if delivered {
		e.delivered = true
		e.lastSent, e.retryAt, e.backoff = now, time.Time{}, 0
		return
	}
	e.backoff = backoff.Next(e.backoff, e.retry, e.repeat)
	e.retryAt = now.Add(e.backoff)
}

// rearm ends the incident. It reports when the incident began and whether
// the phone heard of it, so the rule can push its resolution.
func (e *episode) rearm() (began time.Time, notify bool) {
	began, notify = e.began, e.disarmed && e.delivered
	*e = episode{repeat: e.repeat, retry: e.retry}
	return began, notify
}

// level runs the episode of a rule on a level with hysteresis (the swap
// ratio, memory pressure): it fires while value is at or above threshold
// and a push is due, and resolves once value is hysteresis below it.
func (e *episode) level(rule RuleName, value, threshold, hysteresis float64, s Sample, now time.Time) []Alert {
	switch {
	case value >= threshold:
		if e.due(now) {
			status := e.fire(now)
			return []Alert{{Rule: rule, Status: status, Began: e.began, At: now, Sample: s}}
		}
	case value < threshold-hysteresis:
		if began, notify := e.rearm(); notify {
			return []Alert{{Rule: rule, Status: Resolved, Began: began, At: now, Sample: s}}
		}
	}
	return nil
}

func (e *episode) state(name RuleName) RuleState {
	return RuleState{Name: name, Armed: !e.disarmed, Since: e.began, Undelivered: e.undelivered()}
}

// undelivered reports whether the incident pushed, every push of it so far
// reached no target, and it waits to retry (not while a push is on its way).
func (e *episode) undelivered() bool {
	return e.disarmed && !e.delivered && !e.retryAt.IsZero()
}
