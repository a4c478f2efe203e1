package watchdog

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// facts is what a phase alert tells the texts that word it: the phase,
// how long it ran or the stall lasted, what it stopped on, how many ends it
// counts and why the latest came. pushtext's tests pin the wording.
func facts(a Alert) string {
	switch a.Rule {
	case RuleFailed:
		text := fmt.Sprintf("%q failed after %s", a.Phase, a.PhaseDuration())
		if a.Ends > 1 {
			text = fmt.Sprintf("%q failed %d times in %s", a.Phase, a.Ends, a.Lasted())
		}
		if a.End.Reason != "" {
			text += ": " + a.End.Reason
		}
		return text
	case RuleDone:
		return fmt.Sprintf("%q done in %s", a.Phase, a.PhaseDuration())
	case RuleStalled:
		text := fmt.Sprintf("%q stalled on %s", a.Phase, a.Stall)
		if a.Stall != StallHeartbeat {
			p, _ := a.SampledPhase()
			text += fmt.Sprintf(" at step %d/%d", p.StepNow(), p.Total)
			switch a.Stall {
			case StallEval:
				var evalStep uint64
				if p.EvalStep != nil {
					evalStep = *p.EvalStep
				}
				text += fmt.Sprintf(", eval %d/%d", evalStep, p.EvalTotal)
			case StallBusy:
				text += ", " + p.Busy
			}
		}
		return text + fmt.Sprintf(" for %s", a.Lasted())
	case RuleLoss:
		p, _ := a.SampledPhase()
		at := ""
		if p.HasStep() {
			at = fmt.Sprintf(" at step %d/%d", *p.Step, p.Total)
		}
		return fmt.Sprintf("%q loss is %+v%s", a.Phase, float64(*p.Loss), at)
	}
	return "unexpected rule " + string(a.Rule)
}

type phaseStep struct {
	at     time.Duration // since t0
	phases []phaseapi.Phase
	failed bool // every target failed this poll's pushes
	want   []string
	why    string
}

// endStep is a poll of the end rules: the phase server's ends at the time.
type endStep struct {
	at     time.Duration
	ends   []phaseapi.PhaseEnd
	phases []phaseapi.Phase
	failed bool
	want   []string
	why    string
}

func runEndScript(t *testing.T, rule Rule, steps []endStep) {
	t.Helper()
	script := make([]phaseStep, len(steps))
	ends := make(map[int][]phaseapi.PhaseEnd, len(steps))
	for i, st := range steps {
		script[i] = phaseStep{st.at, st.phases, st.failed, st.want, st.why}
		ends[i] = st.ends
	}
	runPhaseScriptWith(t, rule, script, func(i int) []phaseapi.PhaseEnd { return ends[i] })
}

// runPhaseScript drives rule through steps; each step's want lists
// "status: push text" for every alert raised.
func runPhaseScript(t *testing.T, rule Rule, steps []phaseStep) {
	t.Helper()
	runPhaseScriptWith(t, rule, steps, func(int) []phaseapi.PhaseEnd { return nil })
}

func runPhaseScriptWith(t *testing.T, rule Rule, steps []phaseStep, endsAt func(int) []phaseapi.PhaseEnd) {
	t.Helper()
	for i, st := range steps {
		now := t0.Add(st.at)
		var got []string
		for _, a := range rule.Observe(Sample{Time: now, Phases: st.phases, Ends: endsAt(i)}, now) {
			got = append(got, fmt.Sprintf("%s: %s", a.Status, facts(a)))
			if a.Incident != a.Phase {
				t.Errorf("step %d: %s alert of phase %q is of the incident %q, want its phase", i, a.Rule, a.Phase, a.Incident)
			}
			rule.Pushed(a, !st.failed, now)
		}
		if g, w := strings.Join(got, " | "), strings.Join(st.want, " | "); g != w {
			t.Fatalf("step %d at +%s (%s):\ngot  %q\nwant %q", i, st.at, st.why, g, w)
		}
	}
}

func at(d time.Duration) time.Time { return t0.Add(d) }

func active(name string, started, last time.Duration) phaseapi.Phase {
	return phaseapi.Phase{Name: name, Status: phaseapi.StatusActive, Started: at(started), LastHeartbeat: at(last)}
}

func ended(name string, status string, started, end time.Duration) phaseapi.Phase {
	return phaseapi.Phase{Name: name, Status: status, Started: at(started), Ended: at(end), LastHeartbeat: at(end)}
}

func withStep(p phaseapi.Phase, step, total uint64, movedAt time.Duration) phaseapi.Phase {
	p.Step, p.Total, p.ProgressAt = &step, total, at(movedAt)
	return p
}

func phaseRule(t *testing.T, cfg PhaseConfig, name RuleName) Rule {
	t.Helper()
	rules, err := NewPhaseRules(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.Name() == name {
			return r
		}
	}
	t.Fatalf("no %s rule in %v", name, rules)
	return nil
}

const (
	m = time.Minute
	h = time.Hour
)

// endLog builds the phase server's list of ends as it grows: each call adds
// ends and returns the whole list so far.
type endLog struct{ ends []phaseapi.PhaseEnd }

func (l *endLog) add(ends ...phaseapi.PhaseEnd) []phaseapi.PhaseEnd {
	for _, e := range ends {
		e.Seq = uint64(len(l.ends) + 1)
		l.ends = append(l.ends, e)
	}
	return slices.Clone(l.ends)
}

func end(name string, status string, started, ended time.Duration, reason string) phaseapi.PhaseEnd {
	return phaseapi.PhaseEnd{Phase: name, Status: status, Started: at(started), Ended: at(ended), Reason: reason}
}

func TestPhaseFailedRule(t *testing.T) {
	r := phaseRule(t, PhaseConfig{Repeat: 10 * m, Retry: 5 * time.Second}, RuleFailed)
	var l endLog
	old := l.add(end("Old", phaseapi.StatusFailed, -2*h, -h, ""))
	const oom = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
	runEndScript(t, r, []endStep{
		{at: 0, ends: old, why: "a phase that failed before the first sample is not news"},
		{at: 4 * h, ends: l.add(), why: "running"},
		{at: 4*h + 12*m + 5*time.Second, ends: l.add(end("Pretrain 1/3", phaseapi.StatusFailed, 0, 4*h+12*m, oom), end("Eval", phaseapi.StatusOK, 4*h, 4*h+m, "")),
			want: []string{`firing: "Pretrain 1/3" failed after 4h12m0s: ` + oom}, why: "it failed; an ok end is not a failure"},
		{at: 4*h + 13*m, ends: l.add(), why: "the same end pushes once"},
		{at: 5*h + 46*m, ends: l.add(end("Pretrain 1/3", phaseapi.StatusFailed, 5*h, 5*h+45*m+30*time.Second, "")), failed: true,
			want: []string{`firing: "Pretrain 1/3" failed after 45m30s`}, why: "its second failure is news; no target takes it"},
		{at: 5*h + 46*m + 2*time.Second, ends: l.add(), why: "backoff"},
		{at: 5*h + 46*m + 5*time.Second, ends: l.add(),
			want: []string{`firing: "Pretrain 1/3" failed after 45m30s`}, why: "retried after the backoff, delivered"},
		{at: 5*h + 58*m, ends: l.add(), why: "delivered: never again, and its window closed quiet"},
	})
}

// Four phases that fail in one poll go out in one push; when no target
// takes it, that push's failure doubles the backoff once, not once per
// phase it carried (which made the first retry 40s and the second 10m).
func TestPhaseFailedOnePushBacksOffOnce(t *testing.T) {
	r := phaseRule(t, PhaseConfig{Repeat: 10 * m, Retry: 5 * time.Second}, RuleFailed)
	var l endLog
	four := []string{`firing: "A" failed after 1m0s`, `firing: "B" failed after 1m0s`, `firing: "C" failed after 1m0s`, `firing: "D" failed after 1m0s`}
	runEndScript(t, r, []endStep{
		{at: 0, ends: l.add(), why: "running"},
		{at: m, ends: l.add(end("A", phaseapi.StatusFailed, 0, m, ""), end("B", phaseapi.StatusFailed, 0, m, ""),
			end("C", phaseapi.StatusFailed, 0, m, ""), end("D", phaseapi.StatusFailed, 0, m, "")), failed: true,
			want: four, why: "four failures in one poll; no target takes the push"},
		{at: m + 4*time.Second, ends: l.add(), why: "backoff"},
		{at: m + 5*time.Second, ends: l.add(), failed: true, want: four, why: "retried after the first backoff (5s), failed again"},
		{at: m + 14*time.Second, ends: l.add(), why: "backoff doubled once: 10s"},
		{at: m + 15*time.Second, ends: l.add(), want: four, why: "retried after 10s, delivered"},
		{at: m + 20*time.Second, ends: l.add(), why: "delivered: never again"},
	})
}

// TestPhaseEndedUnwatchedIsPushedByTheFailedRule: an end whose outcome is
// unknown (the process ended while serve was down) reaches the phone
// through the failed rule, as the phase server's reason says it; the done
// rule never takes it.
func TestPhaseEndedUnwatchedIsPushedByTheFailedRule(t *testing.T) {
	const reason = "ended while lavender was down, its end never arrived (pid 27795 gone)"
	unwatched := end("Train", phaseapi.StatusUnknown, 0, 2*h, reason)
	unwatched.Died, unwatched.PID = true, 27795
	for _, tc := range []struct {
		rule RuleName
		want []string
	}{
		{RuleFailed, []string{`firing: "Train" failed after 2h0m0s: ` + reason}},
		{RuleDone, nil},
	} {
		t.Run(string(tc.rule), func(t *testing.T) {
			r := phaseRule(t, PhaseConfig{Notify: []string{"failed", "done"}, Repeat: 10 * m}, tc.rule)
			var l endLog
			runEndScript(t, r, []endStep{
				{at: 0, ends: l.add(), why: "running"},
				{at: 2*h + m, ends: l.add(unwatched), want: tc.want, why: "ended, outcome unknown"},
			})
		})
	}
}

// A failure followed within one poll by a restart of the same phase still
// pushes: the phase table shows it running again, the ends keep the
// failure.
func TestPhaseFailedThenRestartedWithinAPoll(t *testing.T) {
	r := phaseRule(t, PhaseConfig{Repeat: 10 * m}, RuleFailed)
	var l endLog
	runEndScript(t, r, []endStep{
		{at: 0, phases: []phaseapi.Phase{active("R", 0, 0)}, ends: l.add(), why: "running"},
		{at: 5 * time.Second, phases: []phaseapi.Phase{active("R", 4*time.Second, 4*time.Second)}, ends: l.add(end("R", phaseapi.StatusFailed, 0, 3*time.Second, "")),
			want: []string{`firing: "R" failed after 3s`}, why: "failed and started again between two polls"},
	})
}

// An auto-resume loop that crashes again and again: the first failure
// pushes at once, and so does the second (a user restarting by hand sees
// it fail again) and a failure with a new reason, three at most per
// window; the rest within --watchdog.repeat are counted into one push when
// it closes, and so on while the loop lasts; a phase quiet for a window
// pushes its next failure at once again. Failures of another phase are
// counted apart.
func TestPhaseFailuresInAWindowAreCounted(t *testing.T) {
	r := phaseRule(t, PhaseConfig{Repeat: 10 * m, Retry: 5 * time.Second}, RuleFailed)
	var l endLog
	s := time.Second
	const cuda = "RuntimeError: CUDA error: an illegal memory access was encountered"
	runEndScript(t, r, []endStep{
		{at: 0, ends: l.add(), why: "baseline"},
		{at: 1 * m, ends: l.add(end("R", phaseapi.StatusFailed, 0, 1*m-s, cuda)),
			want: []string{`firing: "R" failed after 59s: ` + cuda}, why: "first failure: at once"},
		{at: 2 * m, ends: l.add(end("R", phaseapi.StatusFailed, 1*m, 2*m-s, cuda)),
			want: []string{`firing: "R" failed after 59s: ` + cuda}, why: "the second: at once, a restart by hand failed again"},
		{at: 3 * m, ends: l.add(end("R", phaseapi.StatusFailed, 2*m, 3*m-s, cuda), end("S", phaseapi.StatusFailed, 0, 3*m-s, "")),
			want: []string{`firing: "S" failed after 2m59s`}, why: "the same cause a third time is a loop: held; another phase pushes on its own"},
		{at: 4 * m, ends: l.add(end("R", phaseapi.StatusFailed, 3*m, 4*m-s, cuda)), why: "held"},
		{at: 5 * m, ends: l.add(end("R", phaseapi.StatusFailed, 4*m, 5*m-s, "OSError: [Errno 28] No space left on device")),
			want: []string{`firing: "R" failed after 59s: OSError: [Errno 28] No space left on device`}, why: "a new cause: at once"},
		{at: 6 * m, ends: l.add(end("R", phaseapi.StatusFailed, 5*m, 6*m-s, "ValueError: pid 4242")), why: "a new cause, but three pushed at once already: held"},
		{at: 11 * m, ends: l.add(),
			want: []string{`firing: "R" failed 6 times in 10m1s: ValueError: pid 4242`}, why: "R's window closes: one push counts them"},
		{at: 15 * m, ends: l.add(end("R", phaseapi.StatusFailed, 14*m, 15*m-s, cuda)), why: "the loop goes on, a cause the phone knows: counted in the next window"},
		{at: 21 * m, ends: l.add(),
			want: []string{`firing: "R" failed after 59s: ` + cuda}, why: "next window: one failure in it reads as one"},
		{at: 31 * m, ends: l.add(), why: "a quiet window ends the burst"},
		{at: 40 * m, ends: l.add(end("R", phaseapi.StatusFailed, 39*m, 40*m-s, ""), end("R", phaseapi.StatusFailed, 40*m-s, 40*m-s/2, "OSError: [Errno 28] No space left on device")),
			want: []string{`firing: "R" failed 2 times in 1s: OSError: [Errno 28] No space left on device`}, why: "two in one poll of a quiet phase: at once, counted"},
	})
}

func TestPhaseDoneRuleIsOnByDefault(t *testing.T) {
	rules, err := NewPhaseRules(PhaseConfig{StallAfter: DefaultStallAfter})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rules {
		names = append(names, string(r.Name()))
	}
	if got := strings.Join(names, ","); got != "failed,stalled,loss,done" {
		t.Errorf("default rules %s, want failed,stalled,loss,done", got)
	}
	optOut, err := NewPhaseRules(PhaseConfig{StallAfter: DefaultStallAfter, Notify: []string{"failed", "stalled", "loss"}})
	if err != nil || len(optOut) != 3 {
		t.Errorf("--phase.notify=failed,stalled,loss: %d rules, %v", len(optOut), err)
	}
	r := phaseRule(t, PhaseConfig{}, RuleDone)
	var l endLog
	runEndScript(t, r, []endStep{
		{at: 0, ends: l.add(), why: "running"},
		{at: 4*h + 13*m, ends: l.add(end("Pretrain 1/3", phaseapi.StatusOK, 0, 4*h+12*m, ""), end("Broken", phaseapi.StatusFailed, h, 2*h, "")),
			want: []string{`firing: "Pretrain 1/3" done in 4h12m0s`}, why: "ok end; a failed one is not done"},
		{at: 4*h + 14*m, ends: l.add(), why: "once"},
		{at: 4*h + 15*m, ends: l.add(end("Pretrain 1/3", phaseapi.StatusOK, 4*h+14*m, 4*h+14*m+30*time.Second, "")),
			want: []string{`firing: "Pretrain 1/3" done in 30s`}, why: "done again: every end is news"},
	})
}

func TestPhaseStalledNoHeartbeat(t *testing.T) {
	r := phaseRule(t, PhaseConfig{StallAfter: 10 * m, Repeat: 10 * m}, RuleStalled)
	p := active("Pretrain 1/3", 0, 0)
	runPhaseScript(t, r, []phaseStep{
		{9*m + 59*time.Second, []phaseapi.Phase{p}, false, nil, "not yet"},
		{10*m + 5*time.Second, []phaseapi.Phase{p}, false, []string{`firing: "Pretrain 1/3" stalled on heartbeat for 10m5s`}, "silent 10m"},
		{15 * m, []phaseapi.Phase{p}, false, nil, "known; no reminder yet"},
		{20*m + 5*time.Second, []phaseapi.Phase{p}, false, []string{`reminder: "Pretrain 1/3" stalled on heartbeat for 20m5s`}, "reminder after --watchdog.repeat"},
		{21 * m, []phaseapi.Phase{active("Pretrain 1/3", 0, 21*m)}, false, nil, "a heartbeat re-arms"},
		{31 * m, []phaseapi.Phase{active("Pretrain 1/3", 0, 21*m)}, false, []string{`firing: "Pretrain 1/3" stalled on heartbeat for 10m0s`}, "a new stall pushes again"},
		{32 * m, []phaseapi.Phase{ended("Pretrain 1/3", phaseapi.StatusFailed, 0, 32*m)}, false, nil, "an ended phase is not stalled"},
		{50 * m, []phaseapi.Phase{ended("Pretrain 1/3", phaseapi.StatusFailed, 0, 32*m)}, false, nil, "nor later"},
	})
}

// A phase whose heartbeat thread pings on while its loop is hung: the step
// tells.
func TestPhaseStalledOnStep(t *testing.T) {
	r := phaseRule(t, PhaseConfig{StallAfter: 10 * m, Repeat: 10 * m}, RuleStalled)
	pinging := func(now time.Duration, step uint64, movedAt time.Duration) []phaseapi.Phase {
		return []phaseapi.Phase{withStep(active("Pretrain 1/3", 0, now), step, 5000, movedAt)}
	}
	runPhaseScript(t, r, []phaseStep{
		{5 * m, pinging(5*m, 1200, 0), false, nil, "pings, step stuck for 5m"},
		{10*m + 5*time.Second, pinging(10*m, 1200, 0), false, []string{`firing: "Pretrain 1/3" stalled on step at step 1200/5000 for 10m5s`}, "step stuck 10m"},
		{20*m + 5*time.Second, pinging(20*m, 1200, 0), false, []string{`reminder: "Pretrain 1/3" stalled on step at step 1200/5000 for 20m5s`}, "reminder"},
		{21 * m, pinging(21*m, 1300, 21*m), false, nil, "the step moves: re-armed"},
		{30 * m, pinging(30*m, 1300, 21*m), false, nil, "9m since"},
		{31*m + 5*time.Second, pinging(31*m, 1300, 21*m), false, []string{`firing: "Pretrain 1/3" stalled on step at step 1300/5000 for 10m5s`}, "stuck again"},
	})
	// A phase whose last heartbeat moved the step and then went silent is
	// stalled on its heartbeat; one that never reported a step cannot stall
	// on it.
	r = phaseRule(t, PhaseConfig{StallAfter: 10 * m}, RuleStalled)
	runPhaseScript(t, r, []phaseStep{
		{10 * m, []phaseapi.Phase{withStep(active("A", 0, 0), 7, 0, 0), active("B", 0, 9*m)}, false,
			[]string{`firing: "A" stalled on heartbeat for 10m0s`}, "silent A, pinging B without steps"},
		{40 * m, []phaseapi.Phase{withStep(active("A", 0, 0), 7, 0, 0), active("B", 0, 39*m)}, false, nil, "no reminders with Repeat 0"},
	})
}

func TestPhaseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  PhaseConfig
		want string
	}{
		{PhaseConfig{Notify: []string{"failed", "paused"}}, `--phase.notify: unknown event "paused"`},
		{PhaseConfig{StallAfter: -time.Minute}, "--phase.stall-after must not be negative"},
		{PhaseConfig{StallAfter: 30 * time.Second}, "--phase.stall-after must be at least 1m"},
		{PhaseConfig{Repeat: -time.Second}, "--watchdog.repeat"},
	} {
		if _, err := NewPhaseRules(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
	rules, err := NewPhaseRules(PhaseConfig{Notify: []string{"stalled"}, StallAfter: 0})
	if err != nil || len(rules) != 0 {
		t.Errorf("stall-after 0: %v, %v; want no rule", rules, err)
	}
}

// A phase that ends ok and then fails (a save, a hub push or a callback
// after the client's, raising once training was done) pushes the failure
// alone: never "done" beside it. An ok end of an earlier run of the phase
// is still done.
func TestPhaseDoneThenFailedPushesOnlyTheFailure(t *testing.T) {
	const enospc = "OSError: [Errno 28] No space left on device"
	s := time.Second
	for _, rule := range []RuleName{RuleFailed, RuleDone} {
		t.Run(string(rule), func(t *testing.T) {
			r := phaseRule(t, PhaseConfig{Notify: []string{"failed", "done"}, Repeat: 10 * m}, rule)
			var l endLog
			first, later, done := []string{`firing: "Finetune" failed after 1.5s: ` + enospc}, []string{`firing: "Finetune" failed after 1m15s: ` + enospc}, []string(nil)
			if rule == RuleDone {
				first, later, done = nil, nil, []string{`firing: "Finetune" done in 1m0s`}
			}
			runEndScript(t, r, []endStep{
				{at: 0, ends: l.add(), why: "running"},
				{at: 5 * s, ends: l.add(end("Finetune", phaseapi.StatusOK, 0, s, ""), end("Finetune", phaseapi.StatusFailed, 0, s+s/2, enospc)),
					want: first, why: "ok, then failed at exit, in one poll: only the failure"},
				{at: 2*m + 5*s, ends: l.add(end("Finetune", phaseapi.StatusOK, m, 2*m, "")), why: "the next run ends ok: done waits for what runs after training"},
				{at: 2*m + 20*s, ends: l.add(end("Finetune", phaseapi.StatusFailed, m, 2*m+15*s, enospc)),
					want: later, why: "its hub push fails a poll later: only the failure"},
				{at: 5*m + 5*s, ends: l.add(end("Finetune", phaseapi.StatusOK, 4*m, 5*m, "")), why: "a third run ends ok"},
				{at: 5*m + 25*s, ends: l.add(), why: "not yet settled"},
				{at: 5*m + 35*s, ends: l.add(), want: done, why: "settled with nothing after it: done"},
			})
		})
	}
}

// Work between steps that the client sees moving (compute_metrics, a
// save, a hub push: a ping carries busy while it moves) is progress: a
// slow evaluation with its metrics is no stall. Work that stops moving (a
// hang inside compute_metrics) stalls after the stall time from the last
// busy ping, and the push says what it was doing.
func TestPhaseStalledWhileBusy(t *testing.T) {
	r := phaseRule(t, PhaseConfig{StallAfter: 10 * m, Repeat: 10 * m}, RuleStalled)
	evaluating := func(now, busyAt time.Duration) []phaseapi.Phase {
		p := withStep(active("Finetune", 0, now), 10, 15, 0)
		p = withEval(p, 2, 2, time.Minute)
		p.Busy, p.BusyAt = "evaluating", at(busyAt)
		return []phaseapi.Phase{p}
	}
	runPhaseScript(t, r, []phaseStep{
		{5 * m, evaluating(5*m, 5*m), false, nil, "eval batches done at 1m, compute_metrics moving"},
		{25 * m, evaluating(25*m, 25*m), false, nil, "metrics for 24m, still moving: no stall"},
		{34 * m, evaluating(34*m, 25*m), false, nil, "stuck for 9m"},
		{35*m + 5*time.Second, evaluating(35*m, 25*m), false,
			[]string{`firing: "Finetune" stalled on busy at step 10/15, evaluating for 10m5s`}, "stuck for 10m: a hang inside compute_metrics"},
	})
}

// Work that hangs at once: busy() comes with the last step's ping, so its
// time is the step's own, and no ping moves it after. The stall is still
// the work's, and the push says what it was doing.
func TestPhaseStalledBusyFromItsLastStep(t *testing.T) {
	r := phaseRule(t, PhaseConfig{StallAfter: 10 * m, Repeat: 10 * m}, RuleStalled)
	evaluating := func(now time.Duration) []phaseapi.Phase {
		p := withStep(active("Finetune", 0, now), 12, 15, 5*m)
		p.Busy, p.BusyAt = "evaluating", at(5*m)
		return []phaseapi.Phase{p}
	}
	runPhaseScript(t, r, []phaseStep{
		{5 * m, evaluating(5 * m), false, nil, "step 12 and busy in one ping"},
		{14 * m, evaluating(14 * m), false, nil, "pings come, nothing moves: 9m"},
		{15*m + 5*time.Second, evaluating(15 * m), false,
			[]string{`firing: "Finetune" stalled on busy at step 12/15, evaluating for 10m5s`}, "10m: the evaluation hung"},
	})
}

// A failure whose reason is what a surviving rank saw (the launcher's
// SIGTERM, a peer's reset) is held for OutsideSettle, so the crash that
// caused it, which the phase server puts in the same end, is what the push
// says; one that stays so is pushed after the wait; a failure with its own
// cause pushes at once.
func TestPhaseFailedWaitsForTheRootCause(t *testing.T) {
	r := phaseRule(t, PhaseConfig{Repeat: 10 * m}, RuleFailed)
	s := time.Second
	const cause = "rank 1: Signal 9 (SIGKILL) received by PID 4242"
	survivor := phaseapi.PhaseEnd{Seq: 1, Phase: "DDP", Status: phaseapi.StatusFailed, Reason: "SIGTERM", Started: at(0), Ended: at(m), Outside: true}
	crashed := survivor
	crashed.Reason, crashed.Outside = cause, false
	alone := phaseapi.PhaseEnd{Seq: 2, Phase: "Other", Status: phaseapi.StatusFailed, Reason: "SIGTERM", Started: at(0), Ended: at(3 * m), Outside: true}
	runEndScript(t, r, []endStep{
		{at: 0, why: "baseline"},
		{at: m + 5*s, ends: []phaseapi.PhaseEnd{survivor}, why: "rank 0's SIGTERM: held"},
		{at: m + 10*s, ends: []phaseapi.PhaseEnd{crashed},
			want: []string{`firing: "DDP" failed after 1m0s: ` + cause}, why: "torchrun's root cause replaced it"},
		{at: 3*m + 5*s, ends: []phaseapi.PhaseEnd{crashed, alone}, why: "held"},
		{at: 3*m + 15*s, ends: []phaseapi.PhaseEnd{crashed, alone},
			want: []string{`firing: "Other" failed after 3m0s: SIGTERM`}, why: "no cause came: the SIGTERM it is"},
	})
}

// A phase resumed from the saved table after serve was down 12 minutes:
// its pings were refused meanwhile, so only the silence heard since serve
// started again counts. A stall on the step waits for a ping heard since:
// the same step then shows it stood still all along.
func TestPhaseStalledCountsOnlyTheSilenceHeard(t *testing.T) {
	r := resumedAt{phaseRule(t, PhaseConfig{StallAfter: 10 * m, Repeat: h}, RuleStalled), at(12 * m)}
	silent := active("Pretrain", 0, 0)
	runPhaseScript(t, r, []phaseStep{
		{12*m + 5*time.Second, []phaseapi.Phase{silent}, false, nil, "serve is back after 12m down: the silence before it is unheard"},
		{21 * m, []phaseapi.Phase{silent}, false, nil, "9m of silence heard"},
		{22*m + 5*time.Second, []phaseapi.Phase{silent}, false, []string{`firing: "Pretrain" stalled on heartbeat for 10m5s`}, "10m of silence heard"},
		{23 * m, []phaseapi.Phase{active("Pretrain", 0, 23*m)}, false, nil, "a heartbeat ends it"},
	})
	r = resumedAt{phaseRule(t, PhaseConfig{StallAfter: 10 * m, Repeat: h}, RuleStalled), at(12 * m)}
	pinging := func(last time.Duration) []phaseapi.Phase {
		return []phaseapi.Phase{withStep(active("Pretrain", 0, last), 1200, 5000, 0)}
	}
	runPhaseScript(t, r, []phaseStep{
		{12*m + 5*time.Second, pinging(11 * m), false, nil, "pinged before the stop, the step still since 0: whether it moved while serve was down is unknown"},
		{13 * m, pinging(13 * m), false, []string{`firing: "Pretrain" stalled on step at step 1200/5000 for 13m0s`}, "a ping heard shows the same step: it stood still all along"},
	})
	if _, _, ok := Stalled(silent, at(12*m+5*time.Second), at(12*m), 10*m); ok {
		t.Error("the status page marks the phase stalled at the restart")
	}
}

// resumedAt feeds a rule the samples of a run the phase server took over
// from a stopped process at at.
type resumedAt struct {
	Rule
	at time.Time
}

func (r resumedAt) Observe(s Sample, now time.Time) []Alert {
	s.Run.Resumed = r.at
	return r.Rule.Observe(s, now)
}

// The last poll before a stop pushes the ends it would hold to settle, and
// retries at once a push that reached no phone: no later poll will.
func TestPhaseEndsAreNotHeldAtAStop(t *testing.T) {
	failed := phaseRule(t, PhaseConfig{Repeat: 10 * m}, RuleFailed)
	done := phaseRule(t, PhaseConfig{Repeat: 10 * m}, RuleDone)
	sigterm := phaseapi.PhaseEnd{Seq: 1, Phase: "DDP", Status: phaseapi.StatusFailed, Reason: "SIGTERM", Started: at(0), Ended: at(m), Outside: true}
	ok := phaseapi.PhaseEnd{Seq: 2, Phase: "Eval", Status: phaseapi.StatusOK, Started: at(0), Ended: at(m)}
	ends := []phaseapi.PhaseEnd{sigterm, ok}
	poll := func(r Rule, now time.Time, stopping bool) []string {
		var got []string
		s := Sample{Time: now, Stopping: stopping}
		if now.After(at(0)) {
			s.Ends = ends
		}
		for _, a := range r.Observe(s, now) {
			got = append(got, facts(a))
			r.Pushed(a, false, now) // no phone took it
		}
		return got
	}
	for _, r := range []Rule{failed, done} {
		poll(r, at(0), false) // the baseline
		if got := poll(r, at(m+time.Second), false); got != nil {
			t.Errorf("%s: %q a second after the end, want it held to settle", r.Name(), got)
		}
	}
	if got := poll(failed, at(m+2*time.Second), true); len(got) != 1 || got[0] != `"DDP" failed after 1m0s: SIGTERM` {
		t.Errorf("failed at the stop: %q", got)
	}
	if got := poll(done, at(m+2*time.Second), true); len(got) != 1 || got[0] != `"Eval" done in 1m0s` {
		t.Errorf("done at the stop: %q", got)
	}
	if got := poll(done, at(m+3*time.Second), true); len(got) != 1 {
		t.Errorf("a push no phone took, at a second stop poll before its retry is due: %q, want it tried again", got)
	}
}
