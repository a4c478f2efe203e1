package watchdog

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{900 * time.Millisecond, "0s"},
		{45 * time.Second, "45s"},
		{59*time.Second + 999*time.Millisecond, "59s"},
		{time.Minute, "1m"},
		{10*time.Minute + 4*time.Second, "10m"},
		{59*time.Minute + 59*time.Second, "59m"},
		{time.Hour, "1h"},
		{4*time.Hour + 12*time.Minute + 30*time.Second, "4h12m"},
		{26 * time.Hour, "1d2h"},
		{72*time.Hour + 5*time.Minute, "3d"},
		{-time.Minute, "0s"},
	} {
		if got := HumanDuration(tc.d); got != tc.want {
			t.Errorf("HumanDuration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// pushText is the push the bridge's formatter makes of a phase alert, from
// the fields it is documented to use: a test that those fields suffice for
// the documented texts.
func pushText(a Alert) string {
	switch a.Rule {
	case PhaseRuleFailed:
		return fmt.Sprintf("[lavender-2] phase %q failed after %s", a.Phase, HumanDuration(a.PhaseDuration()))
	case PhaseRuleDone:
		return fmt.Sprintf("[lavender-2] phase %q done in %s", a.Phase, HumanDuration(a.PhaseDuration()))
	case PhaseRuleStalled:
		return fmt.Sprintf("[lavender-2] phase %q stalled: %s", a.Phase, a.StallKind())
	}
	return "unexpected rule " + a.Rule
}

type phaseStep struct {
	at     time.Duration // since t0
	phases []PhaseState
	failed bool // every target failed this poll's pushes
	want   []string
	why    string
}

// runPhaseScript drives rule through steps; each step's want lists
// "status: push text" for every alert raised.
func runPhaseScript(t *testing.T, rule Rule, steps []phaseStep) {
	t.Helper()
	for i, st := range steps {
		now := t0.Add(st.at)
		var got []string
		for _, a := range rule.Observe(Sample{Time: now, Phases: st.phases}, now) {
			got = append(got, fmt.Sprintf("%s: %s", a.Status, pushText(a)))
			rule.Pushed(a, !st.failed, now)
		}
		if g, w := strings.Join(got, " | "), strings.Join(st.want, " | "); g != w {
			t.Fatalf("step %d at +%s (%s):\ngot  %q\nwant %q", i, st.at, st.why, g, w)
		}
	}
}

func at(d time.Duration) time.Time { return t0.Add(d) }

func active(name string, started, last time.Duration) PhaseState {
	return PhaseState{Name: name, Status: PhaseActive, Started: at(started), LastHeartbeat: at(last)}
}

func ended(name string, status PhaseStatus, started, end time.Duration) PhaseState {
	return PhaseState{Name: name, Status: status, Started: at(started), Ended: at(end), LastHeartbeat: at(end)}
}

func withStep(p PhaseState, step, total int64, movedAt time.Duration) PhaseState {
	p.HasStep, p.Step, p.Total, p.ProgressAt = true, step, total, at(movedAt)
	return p
}

func phaseRule(t *testing.T, cfg PhaseConfig, name string) Rule {
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

func TestPhaseFailedRule(t *testing.T) {
	r := phaseRule(t, PhaseConfig{Repeat: 10 * m, Retry: 5 * time.Second}, PhaseRuleFailed)
	old := ended("Old", PhaseFailed, -2*h, -h)
	runPhaseScript(t, r, []phaseStep{
		{0, []PhaseState{old, active("Pretrain 1/3", 0, 0)}, false, nil, "a phase that failed before the first sample is not news"},
		{4 * h, []PhaseState{old, active("Pretrain 1/3", 0, 4*h)}, false, nil, "running"},
		{4*h + 12*m + 5*time.Second, []PhaseState{old, ended("Pretrain 1/3", PhaseFailed, 0, 4*h+12*m), ended("Eval", PhaseOK, 4*h, 4*h+m)}, false,
			[]string{`firing: [lavender-2] phase "Pretrain 1/3" failed after 4h12m`}, "it failed; an ok end is not a failure"},
		{4*h + 13*m, []PhaseState{old, ended("Pretrain 1/3", PhaseFailed, 0, 4*h+12*m)}, false, nil, "the same end pushes once"},
		{5 * h, []PhaseState{old, active("Pretrain 1/3", 5*h, 5*h)}, false, nil, "run again"},
		{5*h + 46*m, []PhaseState{old, ended("Pretrain 1/3", PhaseFailed, 5*h, 5*h+45*m+30*time.Second)}, true,
			[]string{`firing: [lavender-2] phase "Pretrain 1/3" failed after 45m`}, "its second failure is news; no target takes it"},
		{5*h + 46*m + 2*time.Second, []PhaseState{old, ended("Pretrain 1/3", PhaseFailed, 5*h, 5*h+45*m+30*time.Second)}, false, nil, "backoff"},
		{5*h + 46*m + 5*time.Second, []PhaseState{old, ended("Pretrain 1/3", PhaseFailed, 5*h, 5*h+45*m+30*time.Second)}, false,
			[]string{`firing: [lavender-2] phase "Pretrain 1/3" failed after 45m`}, "retried after the backoff, delivered"},
		{5*h + 50*m, []PhaseState{old, ended("Pretrain 1/3", PhaseFailed, 5*h, 5*h+45*m+30*time.Second)}, false, nil, "delivered: never again"},
	})
}

func TestPhaseDoneRuleIsOptIn(t *testing.T) {
	rules, err := NewPhaseRules(PhaseConfig{StallAfter: DefaultStallAfter})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rules {
		names = append(names, r.Name())
	}
	if got := strings.Join(names, ","); got != "failed,stalled" {
		t.Errorf("default rules %s, want failed,stalled", got)
	}
	r := phaseRule(t, PhaseConfig{Notify: []string{"done"}}, PhaseRuleDone)
	runPhaseScript(t, r, []phaseStep{
		{0, []PhaseState{active("Pretrain 1/3", 0, 0)}, false, nil, "running"},
		{4*h + 13*m, []PhaseState{ended("Pretrain 1/3", PhaseOK, 0, 4*h+12*m), ended("Broken", PhaseFailed, h, 2*h)}, false,
			[]string{`firing: [lavender-2] phase "Pretrain 1/3" done in 4h12m`}, "ok end; a failed one is not done"},
		{4*h + 14*m, []PhaseState{ended("Pretrain 1/3", PhaseOK, 0, 4*h+12*m)}, false, nil, "once"},
	})
}

func TestPhaseStalledNoHeartbeat(t *testing.T) {
	r := phaseRule(t, PhaseConfig{StallAfter: 10 * m, Repeat: 10 * m}, PhaseRuleStalled)
	p := active("Pretrain 1/3", 0, 0)
	runPhaseScript(t, r, []phaseStep{
		{9*m + 59*time.Second, []PhaseState{p}, false, nil, "not yet"},
		{10*m + 5*time.Second, []PhaseState{p}, false, []string{`firing: [lavender-2] phase "Pretrain 1/3" stalled: no heartbeat for 10m`}, "silent 10m"},
		{15 * m, []PhaseState{p}, false, nil, "known; no reminder yet"},
		{20*m + 5*time.Second, []PhaseState{p}, false, []string{`reminder: [lavender-2] phase "Pretrain 1/3" stalled: no heartbeat for 20m`}, "reminder after --watchdog.repeat"},
		{21 * m, []PhaseState{active("Pretrain 1/3", 0, 21*m)}, false, nil, "a heartbeat re-arms"},
		{31 * m, []PhaseState{active("Pretrain 1/3", 0, 21*m)}, false, []string{`firing: [lavender-2] phase "Pretrain 1/3" stalled: no heartbeat for 10m`}, "a new stall pushes again"},
		{32 * m, []PhaseState{ended("Pretrain 1/3", PhaseFailed, 0, 32*m)}, false, nil, "an ended phase is not stalled"},
		{50 * m, []PhaseState{ended("Pretrain 1/3", PhaseFailed, 0, 32*m)}, false, nil, "nor later"},
	})
}

// A phase whose heartbeat thread pings on while its loop is hung: the step
// tells.
func TestPhaseStalledOnStep(t *testing.T) {
	r := phaseRule(t, PhaseConfig{StallAfter: 10 * m, Repeat: 10 * m}, PhaseRuleStalled)
	pinging := func(now time.Duration, step int64, movedAt time.Duration) []PhaseState {
		return []PhaseState{withStep(active("Pretrain 1/3", 0, now), step, 5000, movedAt)}
	}
	runPhaseScript(t, r, []phaseStep{
		{5 * m, pinging(5*m, 1200, 0), false, nil, "pings, step stuck for 5m"},
		{10*m + 5*time.Second, pinging(10*m, 1200, 0), false, []string{`firing: [lavender-2] phase "Pretrain 1/3" stalled: step 1200/5000 for 10m`}, "step stuck 10m"},
		{20*m + 5*time.Second, pinging(20*m, 1200, 0), false, []string{`reminder: [lavender-2] phase "Pretrain 1/3" stalled: step 1200/5000 for 20m`}, "reminder"},
		{21 * m, pinging(21*m, 1300, 21*m), false, nil, "the step moves: re-armed"},
		{30 * m, pinging(30*m, 1300, 21*m), false, nil, "9m since"},
		{31*m + 5*time.Second, pinging(31*m, 1300, 21*m), false, []string{`firing: [lavender-2] phase "Pretrain 1/3" stalled: step 1300/5000 for 10m`}, "stuck again"},
	})
	// A phase whose last heartbeat moved the step and then went silent is
	// stalled on its heartbeat; one that never reported a step cannot stall
	// on it.
	r = phaseRule(t, PhaseConfig{StallAfter: 10 * m}, PhaseRuleStalled)
	runPhaseScript(t, r, []phaseStep{
		{10 * m, []PhaseState{withStep(active("A", 0, 0), 7, 0, 0), active("B", 0, 9*m)}, false,
			[]string{`firing: [lavender-2] phase "A" stalled: no heartbeat for 10m`}, "silent A, pinging B without steps"},
		{40 * m, []PhaseState{withStep(active("A", 0, 0), 7, 0, 0), active("B", 0, 39*m)}, false, nil, "no reminders with Repeat 0"},
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
