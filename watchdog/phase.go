package watchdog

import (
	"fmt"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// DefaultStallAfter is how long an active phase may go without a heartbeat,
// or a phase that reports steps without a new step, before it counts as
// stalled: the same 10 minutes as the PhaseStalled alert of alerts.yml.
const DefaultStallAfter = 10 * time.Minute

// DefaultPhaseNotify is --phase.notify's default: every event, done too,
// since "tell me when it has finished" is what a first try expects to see.
var DefaultPhaseNotify = []string{string(RuleFailed), string(RuleStalled), string(RuleLoss), string(RuleDone)}

// PhaseConfig tunes the phase rules. The error messages name the flags
// that set these fields.
type PhaseConfig struct {
	// Notify lists the rules to run: failed, stalled, loss, done. nil means
	// DefaultPhaseNotify; an empty, non-nil list runs none.
	Notify []string // --phase.notify
	// StallAfter is the silence, or the time without a new step, after
	// which an active phase is stalled; 0 turns the stalled rule off.
	StallAfter time.Duration // --phase.stall-after
	Repeat     time.Duration // --watchdog.repeat: reminder while a stall lasts; 0: none
	Retry      time.Duration // --watchdog.interval: first retry after a push no target accepted; 0: DefaultInterval
}

// NewPhaseRules checks cfg and returns the phase rules it asks for, in the
// order failed, stalled, loss, done. cmd appends them to NewRules' rules and
// feeds Sample.Phases from the phase server's table.
func NewPhaseRules(cfg PhaseConfig) ([]Rule, error) {
	notify := cfg.Notify
	if notify == nil {
		notify = DefaultPhaseNotify
	}
	want := map[RuleName]bool{}
	for _, item := range notify {
		n := RuleName(strings.TrimSpace(item))
		switch n {
		case RuleFailed, RuleStalled, RuleLoss, RuleDone:
			want[n] = true
		default:
			return nil, fmt.Errorf("--phase.notify: unknown event %q; want a list of failed, stalled, loss and done", n)
		}
	}
	if cfg.StallAfter < 0 {
		return nil, fmt.Errorf("--phase.stall-after must not be negative, not %s", cfg.StallAfter)
	}
	if want[RuleStalled] && cfg.StallAfter > 0 && cfg.StallAfter < time.Minute {
		// Heartbeats come every minute by default (phase run's --every):
		// a shorter silence is the normal gap between two of them.
		return nil, fmt.Errorf("--phase.stall-after must be at least 1m (or 0 to turn it off), not %s", cfg.StallAfter)
	}
	repeat, retry, err := cadence(cfg.Repeat, cfg.Retry)
	if err != nil {
		return nil, err
	}
	var rules []Rule
	if want[RuleFailed] {
		window := repeat
		if window == 0 {
			window = DefaultRepeat
		}
		rules = append(rules, &PhaseEndRule{name: RuleFailed, status: phaseapi.StatusFailed, window: window, outbox: outbox{repeat: repeat, retry: retry}})
	}
	if want[RuleStalled] && cfg.StallAfter > 0 {
		rules = append(rules, &StallRule{after: cfg.StallAfter, repeat: repeat, retry: retry})
	}
	if want[RuleLoss] {
		rules = append(rules, &LossRule{outbox: outbox{repeat: repeat, retry: retry}})
	}
	if want[RuleDone] {
		rules = append(rules, &PhaseEndRule{name: RuleDone, status: phaseapi.StatusOK, outbox: outbox{repeat: repeat, retry: retry}})
	}
	return rules, nil
}

// StallRule pushes "stalled" for an active phase that has sent no heartbeat
// for the stall time, or that reports steps and keeps pinging while its
// step has not moved for that long: a training loop hung on a collective
// or a data loader, whose heartbeat thread pings on. The alert's Began is
// when the silence began (the last heartbeat) or when the step last moved,
// or when this process resumed the phase's run if later (see Stalled); it
// stays the same through the stall's reminders, one every Repeat. The
// stall ends, silently, when a heartbeat comes (for the first kind) or the
// step moves (for the second), or when the phase ends; the rule is then
// armed for that phase again.
type StallRule struct {
	after, repeat, retry time.Duration

	stalls map[phaseRun]*stall
}

// phaseRun identifies one run of a phase: a restarted phase stalls afresh.
type phaseRun struct {
	name    string
	started int64
}

type stall struct {
	ep     episode
	began  time.Time
	onStep bool // the step stopped while heartbeats came
}

// Name is RuleStalled.
func (r *StallRule) Name() RuleName { return RuleStalled }

// Observe checks every active phase.
func (r *StallRule) Observe(s Sample, now time.Time) []Alert {
	live := make(map[phaseRun]*stall, len(s.Phases))
	var out []Alert
	for _, p := range s.Phases {
		if p.Status != phaseapi.StatusActive {
			continue
		}
		key := phaseRun{p.Name, p.Started.UnixNano()}
		st := r.stalls[key]
		if st != nil && st.over(p) {
			st = nil // re-armed: heartbeats or progress resumed
		}
		if st == nil {
			began, onStep, ok := Stalled(p, now, s.Run.Resumed, r.after)
			if !ok {
				continue
			}
			st = &stall{ep: episode{repeat: r.repeat, retry: r.retry}, began: began, onStep: onStep}
		}
		live[key] = st
		if st.ep.due(now) {
			status := st.ep.fire(now)
			out = append(out, Alert{Rule: RuleStalled, Status: status, Incident: p.Name, Began: st.began, At: now, Sample: s, Phase: p.Name, Stall: stallKind(p, st.onStep)})
		}
	}
	r.stalls = live
	return out
}

// Stalled reports whether the active phase p is stalled at now after the
// stall time after, since when, and whether on its step: it sent no
// heartbeat for after, or it reports steps and kept pinging while its step
// did not move for after. Silence comes first: a phase that sends nothing
// is stalled on its heartbeat, whatever its step. The stalled rule and the
// status page both ask it, so the page marks what the phone is told.
//
// resumed is when this process took p's run over from the table a stopped
// process saved (phaseapi.Run.Resumed; zero: it did not), and no silence
// before it counts: while serve was down (a restart loop, a long upgrade)
// the phase's pings were refused, so its last heartbeat says nothing of
// its health then, and counting the downtime would push a false stall at
// the first poll. Counting from the later of the two can delay a real
// stall by the silence heard before the stop, always under after (a longer
// one was a stall already). That silence is not added: after a kill -9
// nothing says when the stop came (pings are saved at most every few
// seconds, and a silent phase causes no saves). A stall on the step waits
// for a ping heard since then, which shows whether the step moved while
// nobody listened; if it did not, it stood still all along, and counts so.
//
// An evaluation's progress counts as movement: a slow evaluation between
// two steps is not a stall, a hung one is. So does work between steps the
// client saw moving (busy: compute_metrics, a save, a hub push): the
// client sends it only while the training thread moves, so a hang inside
// that work stalls too. A phase that told its total but
// no step yet is at step 0 since its start, so a hang before the first step
// (a first-batch data-loader or NCCL deadlock) stalls too. A phase that
// never reports steps (a wrapped shell command) can stall only by silence.
func Stalled(p phaseapi.Phase, now, resumed time.Time, after time.Duration) (since time.Time, onStep, ok bool) {
	if p.Status != phaseapi.StatusActive || after <= 0 {
		return time.Time{}, false, false
	}
	if silent := later(p.LastHeartbeat, resumed); now.Sub(silent) >= after {
		return silent, false, true
	}
	moved, steps := lastMoved(p)
	if steps && p.LastHeartbeat.After(moved) && !p.LastHeartbeat.Before(resumed) && now.Sub(moved) >= after {
		return moved, true, true
	}
	return time.Time{}, false, false
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// lastMoved is when p last made progress, the step's, the evaluation's or
// work between steps, and whether p reports progress at all: a step, or a
// total before the first step (then it is at step 0 since its start).
func lastMoved(p phaseapi.Phase) (time.Time, bool) {
	var moved time.Time
	switch {
	case p.HasStep():
		moved = p.ProgressAt
	case p.Total > 0:
		moved = p.Started
	default:
		return time.Time{}, false
	}
	if p.EvalStep != nil && p.EvalProgressAt.After(moved) {
		moved = p.EvalProgressAt
	}
	if p.Busy != "" && p.BusyAt.After(moved) {
		moved = p.BusyAt
	}
	return moved, true
}

// over reports whether what the stall waited for has come.
func (st *stall) over(p phaseapi.Phase) bool {
	if st.onStep {
		moved, _ := lastMoved(p)
		return moved.After(st.began)
	}
	return p.LastHeartbeat.After(st.began)
}

// Pushed learns the outcome of a push for one phase's stall.
func (r *StallRule) Pushed(a Alert, delivered bool, now time.Time) {
	for key, st := range r.stalls {
		if key.name == a.Phase && st.began.Equal(a.Began) {
			st.ep.pushed(delivered, now)
		}
	}
}

// State is armed while no phase is stalled; Since is when the earliest
// current stall began.
func (r *StallRule) State() RuleState {
	st := RuleState{Name: RuleStalled, Armed: true}
	for _, s := range r.stalls {
		if st.Armed || s.began.Before(st.Since) {
			st.Armed, st.Since = false, s.began
		}
		st.Undelivered = st.Undelivered || s.ep.undelivered()
	}
	return st
}

// SampledPhase is the phase an alert of a phase rule is about, as the
// sample that raised it saw it.
func (a Alert) SampledPhase() (phaseapi.Phase, bool) {
	for _, p := range a.Sample.Phases {
		if p.Name == a.Phase {
			return p, true
		}
	}
	return phaseapi.Phase{}, false
}

// PhaseDuration is how long the phase of a failed or done alert ran, from
// its start to its end.
func (a Alert) PhaseDuration() time.Duration {
	if a.End.Seq != 0 {
		return a.End.Duration()
	}
	p, ok := a.SampledPhase()
	if !ok || p.Ended.IsZero() {
		return a.Lasted()
	}
	return max(p.Ended.Sub(p.Started), 0)
}

// StallKind is what a stalled phase stopped on: the stalled rule's alert
// carries it, and pushtext words it with the phase's figures.
type StallKind string

const (
	// StallHeartbeat: the phase sent no heartbeat for the stall time.
	StallHeartbeat StallKind = "heartbeat"
	// StallStep: heartbeats came but the step did not move.
	StallStep StallKind = "step"
	// StallEval: an evaluation moved last, then stopped.
	StallEval StallKind = "eval"
	// StallBusy: work between steps (compute_metrics, a save) was last
	// seen moving, then stopped.
	StallBusy StallKind = "busy"
)

// stallKind says what the stall of p is about, as the sample at its alert
// shows it: for a stall on its step, a step, an evaluation or work between
// steps that stopped while heartbeats came; else the heartbeat.
func stallKind(p phaseapi.Phase, onStep bool) StallKind {
	moved, steps := lastMoved(p)
	if !onStep || !steps {
		return StallHeartbeat
	}
	// Busy at the last step's own time counts: busy() comes with the ping
	// that carries the step it follows, and work that hangs at once never
	// sends another.
	if p.Busy != "" && moved.Equal(p.BusyAt) && !p.BusyAt.Before(p.ProgressAt) && !p.BusyAt.Before(p.EvalProgressAt) {
		return StallBusy
	}
	if p.EvalStep != nil && moved.Equal(p.EvalProgressAt) && !p.EvalProgressAt.Before(p.ProgressAt) {
		return StallEval
	}
	return StallStep
}
