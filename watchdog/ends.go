package watchdog

import (
	"slices"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// OutsideSettle is how long the failed rule holds a failure whose reason
// is Outside, for the crash that caused it to replace it: torchrun prints
// its root cause once every worker has exited, a few seconds after the
// survivors report their SIGTERM. A failure with its own cause pushes at
// once.
const OutsideSettle = 15 * time.Second

// DoneSettle is how long the done rule holds an ok end before it pushes
// it: what runs after training (a final save, a hub push, a callback
// after the client's) may still fail the phase, and then the phone hears
// only of the failure.
const DoneSettle = 30 * time.Second

// PhaseEndRule pushes for every end of a phase with its status: "failed"
// for phaseapi.StatusFailed, "done" for phaseapi.StatusOK. Ends from
// before the first sample are not news and never push. A push that
// reached no target is retried with a backoff until one does.
//
// With a window (the failed rule's is --watchdog.repeat), a phase that
// fails again and again is not pushed at every failure. The failure that
// opens the window pushes at once, and so do, up to maxAtOnce in all, the
// next one (someone who restarts by hand sees the retry fail at once) and
// any whose reason no push of the window has named (something changed).
// The rest are counted, and when the window closes one push says "failed
// 6 times in 10m" with the latest reason; a new window opens with that
// push, so a crash loop with one cause costs a push or two per window.
// Failures that arrive in one poll for a quiet phase push at once, counted
// together.
type PhaseEndRule struct {
	name   RuleName
	status string        // phaseapi.StatusFailed or phaseapi.StatusOK
	window time.Duration // 0: every end pushes on its own
	outbox outbox

	baselined bool
	lastSeq   uint64
	bursts    map[string]*burst // by phase: failures since its last push

	// readTo is how far the rule has read the ends: every end that ended
	// at or before it was pushed, or old news at the first poll. It is
	// carried over a restart (open, restore), so that the ends the phase
	// server gives back from its saved table are news only past it; before
	// the first poll only restore sets it.
	readTo time.Time
}

// maxAtOnce bounds the failures of one window that push at once, so that
// a crash loop whose reason changes every time (a temp path, a pid in the
// message) still pushes once per window after them.
const maxAtOnce = 3

// burst is one phase's window of repeated failures.
type burst struct {
	since, until time.Time
	count        int // ends within the window, the opening one included
	held         int // ends not pushed yet
	last         phaseapi.PhaseEnd
	atOnce       int      // pushes at once in this window
	reasons      []string // the reasons the phone has seen from this burst
	continued    bool     // opened by a window's count, not by a failure
}

// takes says whether e is the rule's to push: an end of its status, and
// for the failed rule also an end whose outcome is unknown (the process
// ended while no lavender watched): the phone learns the phase is over,
// worded as what is known, not as a failure.
func (r *PhaseEndRule) takes(e phaseapi.PhaseEnd) bool {
	return e.Status == r.status || (r.status == phaseapi.StatusFailed && e.Status == phaseapi.StatusUnknown)
}

// Name is "failed" or "done".
func (r *PhaseEndRule) Name() RuleName { return r.name }

// Observe pushes for the ends with the rule's status since the last sample.
func (r *PhaseEndRule) Observe(s Sample, now time.Time) []Alert {
	if !r.baselined {
		r.baselined = true
		if r.readTo.IsZero() { // nothing carried over
			// Everything that ended before the first poll is old news.
			r.readTo = now
			for _, e := range s.Ends {
				r.lastSeq = max(r.lastSeq, e.Seq)
				if e.Ended.After(r.readTo) {
					r.readTo = e.Ended
				}
			}
			// Only pushes carried over a restart (restore) can be pending.
			return r.outbox.send(nil, now, s.Stopping)
		}
		// Carried over a restart: the ends past readTo, which the phase
		// server gave back from its saved table, are news, read below.
		for _, e := range s.Ends {
			if e.Ended.After(r.readTo) {
				break
			}
			r.lastSeq = max(r.lastSeq, e.Seq)
		}
	}
	var order []string
	fresh := map[string][]phaseapi.PhaseEnd{}
	for _, e := range s.Ends {
		if e.Seq <= r.lastSeq {
			continue
		}
		// A stop leaves no next poll: what settles is pushed as it stands.
		if !s.Stopping && r.status == phaseapi.StatusFailed && e.Status == phaseapi.StatusFailed && e.Outside && now.Sub(e.Ended) < OutsideSettle {
			break // read again at the next poll, with the cause if it came
		}
		if !s.Stopping && r.status == phaseapi.StatusOK && e.Status == phaseapi.StatusOK && now.Sub(e.Ended) < DoneSettle {
			break // read again at the next poll, with a failure if one came
		}
		r.lastSeq = e.Seq
		if e.Ended.After(r.readTo) {
			r.readTo = e.Ended
		}
		if !r.takes(e) || (e.Status == phaseapi.StatusOK && failedLater(s.Ends, e)) {
			continue
		}
		if _, ok := fresh[e.Phase]; !ok {
			order = append(order, e.Phase)
		}
		fresh[e.Phase] = append(fresh[e.Phase], e)
	}
	var out []Alert
	for _, name := range order {
		out = append(out, r.ended(name, fresh[name], s, now)...)
	}
	out = append(out, r.closeWindows(s, now)...)
	return r.outbox.send(out, now, s.Stopping)
}

// ended takes the new ends of one phase: a push at once, unless a window
// of this phase is open, which counts them instead.
func (r *PhaseEndRule) ended(name string, ends []phaseapi.PhaseEnd, s Sample, now time.Time) []Alert {
	last := ends[len(ends)-1]
	if r.window <= 0 {
		var out []Alert
		for _, e := range ends {
			out = append(out, Alert{Rule: r.name, Status: Firing, Incident: name, Began: e.Ended, At: now, Sample: s, Phase: name, End: e, Ends: 1})
		}
		return out
	}
	if b := r.bursts[name]; b != nil && now.Before(b.until) {
		var out []Alert
		for _, e := range ends {
			b.count++
			second := b.count == 2 && !b.continued
			if b.atOnce < maxAtOnce && (second || !slices.Contains(b.reasons, e.Reason)) {
				b.atOnce++
				b.reasons = append(b.reasons, e.Reason)
				out = append(out, Alert{Rule: r.name, Status: Firing, Incident: name, Began: e.Ended, At: now, Sample: s, Phase: name, End: e, Ends: 1})
				continue
			}
			b.held++
			b.last = e
		}
		return out
	}
	if r.bursts == nil {
		r.bursts = map[string]*burst{}
	}
	b := &burst{since: ends[0].Ended, until: now.Add(r.window), count: len(ends), last: last, atOnce: 1, reasons: []string{last.Reason}}
	r.bursts[name] = b
	return []Alert{{Rule: r.name, Status: Firing, Incident: name, Began: b.since, At: now, Sample: s, Phase: name, End: last, Ends: len(ends)}}
}

// closeWindows pushes the count of every window that closed with failures
// in it, and opens the next; a window that closed quiet is forgotten.
func (r *PhaseEndRule) closeWindows(s Sample, now time.Time) []Alert {
	var out []Alert
	for name, b := range r.bursts {
		if now.Before(b.until) {
			continue
		}
		if b.held == 0 {
			delete(r.bursts, name)
			continue
		}
		out = append(out, Alert{Rule: r.name, Status: Firing, Incident: name, Began: b.since, At: now, Sample: s, Phase: name, End: b.last, Ends: b.count})
		reasons := b.reasons
		if !slices.Contains(reasons, b.last.Reason) {
			reasons = append(reasons, b.last.Reason)
		}
		*b = burst{since: now, until: now.Add(r.window), last: b.last, reasons: reasons, continued: true}
	}
	slices.SortFunc(out, func(a, b Alert) int { return a.End.Ended.Compare(b.End.Ended) })
	return out
}

// failedLater reports whether the same run of e's phase (same start)
// failed after e ended ok: a save, a hub push or a callback that failed
// once training was done. The push then names only the failure, never
// "done" beside it.
func failedLater(ends []phaseapi.PhaseEnd, e phaseapi.PhaseEnd) bool {
	for _, f := range ends {
		if f.Seq > e.Seq && f.Phase == e.Phase && f.Started.Equal(e.Started) && f.Status == phaseapi.StatusFailed {
			return true
		}
	}
	return false
}

// Pushed forgets a delivered push, or schedules a retry of what is pending.
func (r *PhaseEndRule) Pushed(a Alert, delivered bool, now time.Time) {
	r.outbox.pushed(func(p Alert) bool {
		return p.Phase == a.Phase && p.Began.Equal(a.Began) && p.End.Seq == a.End.Seq
	}, delivered, now)
}

// State: armed unless a push waits for a target; Since is when the first
// waiting end came.
func (r *PhaseEndRule) State() RuleState { return r.outbox.state(r.name) }

// open lists the pushes no phone took yet, so that a restart of serve (or
// a crash after the poll that saved them) tries them again: an end is
// news once, and the process that read it may be the only one that did.
func (r *PhaseEndRule) open() []OpenIncident {
	var out []OpenIncident
	if !r.readTo.IsZero() {
		out = append(out, OpenIncident{Rule: r.name, Began: r.readTo})
	}
	for _, a := range r.outbox.pending {
		end := a.End
		out = append(out, OpenIncident{Rule: r.name, Incident: a.Incident, End: &end, Ends: a.Ends, Began: a.Began, LastSent: a.At})
	}
	return out
}

// restore queues again a push no phone took before the restart, as it
// was worded (its end, its count, its poll), for the first poll: the same
// notification id, since its rule, phase and Began are the same. The
// window of repeated failures it may have opened is not carried: the next
// failure of the phase pushes at once.
func (r *PhaseEndRule) restore(o OpenIncident) bool {
	if o.End == nil && o.Incident == "" && !o.Began.IsZero() {
		r.readTo = o.Began
		return true
	}
	if o.End == nil || o.Ends < 1 || o.Incident == "" {
		return false
	}
	r.outbox.pending = append(r.outbox.pending, Alert{Rule: r.name, Status: Firing, Incident: o.Incident, Began: o.Began, At: o.LastSent,
		Phase: o.Incident, End: *o.End, Ends: o.Ends})
	return true
}
