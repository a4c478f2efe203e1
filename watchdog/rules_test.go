package watchdog

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// step is one poll of a rule-level script: after advancing the clock, the
// rule observes s; pushed is the outcome of whatever it raised.
type step struct {
	after  time.Duration
	s      Sample
	failed bool   // every target failed the push of this poll
	want   string // the alerts raised, "" for none
	why    string
}

// runScript drives rule through steps on a fake clock starting at t0.
func runScript(t *testing.T, rule Rule, steps []step) {
	t.Helper()
	now := t0
	for i, st := range steps {
		now = now.Add(st.after)
		alerts := rule.Observe(st.s, now)
		var got []string
		for _, a := range alerts {
			got = append(got, describe(a))
			rule.Pushed(a, !st.failed, now)
		}
		if g := strings.Join(got, "; "); g != st.want {
			t.Fatalf("step %d at +%s (%s): got %q, want %q", i, now.Sub(t0), st.why, g, st.want)
		}
	}
}

// describe is an alert in a form a table can spell: rule, status, when the
// incident began (since t0), and the OOM facts when there are any.
func describe(a Alert) string {
	s := fmt.Sprintf("%s %s began+%s", a.Rule, a.Status, a.Began.Sub(t0))
	if a.Kills > 0 {
		s += fmt.Sprintf(" kills=%d", a.Kills)
	}
	if a.Victim.Known() {
		s += fmt.Sprintf(" victim=%s/%d", a.Victim.Name, a.Victim.PID)
	}
	if a.Phase != "" {
		s += fmt.Sprintf(" phase=%q", a.Phase)
	}
	return s
}

func swapAt(ratio float64) Sample { return Sample{Swap: swapOf(ratio)} }

func TestSwapRule(t *testing.T) {
	rule, err := NewSwapRule(SwapConfig{Threshold: 0.5, Hysteresis: 0.05, Repeat: time.Minute, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := 5 * time.Second
	runScript(t, rule, []step{
		{0, swapAt(0.49), false, "", "below"},
		{s, Sample{}, false, "", "no swap at all"},
		{s, swapAt(0.50), true, "swap firing began+10s", "at the threshold; every target fails"},
		{s, swapAt(0.60), true, "swap firing began+10s", "retry after 5s, fails again"},
		{s, swapAt(0.60), false, "", "backoff now 10s"},
		{s, swapAt(0.60), false, "swap firing began+10s", "retry 10s later gets through: still the first push the phone sees"},
		{time.Minute - s, swapAt(0.60), false, "", "a poll short of the reminder"},
		{s, swapAt(0.60), false, "swap reminder began+10s", "reminder, same incident"},
		{s, swapAt(0.46), false, "", "inside the hysteresis band"},
		{s, swapAt(0.44), false, "swap resolved began+10s", "below threshold minus hysteresis: resolved"},
		{s, swapAt(0.30), false, "", "resolved once"},
		{s, swapAt(0.70), true, "swap firing began+1m45s", "a new incident begins, every target fails"},
		{s, swapAt(0.10), false, "", "it ends before any push got through: nothing to resolve on the phone"},
		{s, swapAt(0.70), false, "swap firing began+1m55s", "armed again"},
	})
}

func pressureAt(some float64) Sample {
	return Sample{Swap: swapOf(0.26), Pressure: Pressure{Available: true, Some: some, Full: some / 2}}
}

func TestPressureRule(t *testing.T) {
	rule, err := NewPressureRule(PressureConfig{Threshold: 0.10, Hysteresis: 0.05, Repeat: time.Minute, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := 5 * time.Second
	runScript(t, rule, []step{
		{0, pressureAt(0.09), false, "", "below"},
		{s, Sample{Swap: swapOf(0.9)}, false, "", "no PSI: silent, whatever swap says"},
		{s, pressureAt(0.105), false, "pressure firing began+10s", "at 10.5% it fires"},
		{s, pressureAt(0.30), false, "", "still high"},
		{s, pressureAt(0.06), false, "", "inside the hysteresis band"},
		{s, pressureAt(0.12), false, "", "back above: not re-armed, no reminder due"},
		{time.Minute - 3*s, pressureAt(0.12), false, "pressure reminder began+10s", "reminder after repeat"},
		{s, Sample{}, false, "", "PSI gone mid-incident: no news either way"},
		{s, pressureAt(0.049), false, "pressure resolved began+10s", "below 5%: resolved"},
		{s, pressureAt(0.10), true, "pressure firing began+1m25s", "exactly at the threshold; fails"},
		{s, pressureAt(0.10), false, "pressure firing began+1m25s", "retried after the interval"},
	})
}

func TestPressureRuleOff(t *testing.T) {
	rule, err := NewPressureRule(PressureConfig{Threshold: 0, Hysteresis: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	runScript(t, rule, []step{
		{0, pressureAt(1), false, "", "threshold 0 turns the rule off"},
		{time.Hour, pressureAt(0.5), false, "", "still off"},
	})
}

func oomAt(kills uint64, victim Victim, phases ...phaseapi.Phase) Sample {
	return Sample{Swap: swapOf(0.56), OOM: OOM{Available: true, Kills: kills, Victim: victim}, Phases: phases}
}

func TestOOMRule(t *testing.T) {
	rule, err := NewOOMRule(OOMConfig{Repeat: 20 * time.Second, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := 5 * time.Second
	old := Victim{PID: 17, Name: "chrome", Seq: 100}
	py := Victim{PID: 4242, Name: "python3", Seq: 200}
	pretrain := phaseapi.Phase{Name: "Pretrain 1/3", Status: phaseapi.StatusActive, Started: t0}
	eval := phaseapi.Phase{Name: "Eval", Status: phaseapi.StatusActive, Started: t0.Add(time.Minute)}
	done := phaseapi.Phase{Name: "Tokenize", Status: phaseapi.StatusOK, Started: t0.Add(2 * time.Minute)}
	runScript(t, rule, []step{
		{0, Sample{}, false, "", "no oom_kill on this kernel"},
		{s, oomAt(7, old), false, "", "the first reading is the baseline: kills from before lavender never push"},
		{s, oomAt(7, old), false, "", "no rise"},
		{s, oomAt(8, old, pretrain, done), false, "oom firing began+15s kills=1", "a rise pushes at once; the old victim is not this kill's, and a running phase is not blamed for an unknown one"},
		{s, oomAt(8, py), false, "", "the kernel log names a victim late: no rise, no push"},
		{s, oomAt(11, py, pretrain, eval), false, "oom firing began+25s kills=3", "three kills at once; the victim was already seen, so it is not theirs"},
		{s, oomAt(12, Victim{PID: 4242, Name: "python3", Seq: 300, Owner: VictimOfPhase, Phase: "Eval"}, pretrain, eval), false, "oom firing began+30s kills=1 victim=python3/4242 phase=\"Eval\"", "a new record for a reused pid, Eval's process as the reader judged"},
		{s, oomAt(2, Victim{}), false, "", "the counter went backwards: a new baseline"},
		{s, oomAt(3, Victim{}), true, "oom firing began+40s kills=1", "a rise; every target fails"},
		{s, oomAt(3, Victim{}), true, "oom firing began+40s kills=1", "retried 5s later, fails"},
		{s, oomAt(5, Victim{}), true, "oom firing began+40s kills=3", "new kills push at once, merged with the undelivered one"},
		{s, Sample{}, false, "", "oom_kill unreadable, and the backoff (20s, capped at repeat) runs"},
		{3 * s, oomAt(5, Victim{}), false, "oom firing began+40s kills=3", "the retry gets through"},
		{s, oomAt(5, Victim{}), false, "", "nothing pending"},
	})
	if st := rule.State(); !st.Armed {
		t.Errorf("state %+v after a delivered push", st)
	}
}

// TestOOMRuleVictimLoggedBeforeCounted: kernels since 4.19 log the kill
// just before they count it, so a poll can see the record a poll before
// the rise; the rise is still named. A record that comes right after a
// rise (older kernels) names no later kill.
func TestOOMRuleVictimLoggedBeforeCounted(t *testing.T) {
	rule, err := NewOOMRule(OOMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s := 5 * time.Second
	py := Victim{PID: 4242, Name: "python3", Seq: 200}
	late := Victim{PID: 77, Name: "loader", Seq: 300}
	newer := Victim{PID: 88, Name: "tokenizer", Seq: 400}
	runScript(t, rule, []step{
		{0, oomAt(1, Victim{}), false, "", "baseline"},
		{s, oomAt(1, py), false, "", "logged, not yet counted"},
		{s, oomAt(1, py), false, "", "still not counted"},
		{s, oomAt(2, py), false, "oom firing began+15s kills=1 victim=python3/4242", "counted: named"},
		{s, oomAt(3, py), false, "oom firing began+20s kills=1", "a second kill with no record of its own yet: unnamed"},
		{s, oomAt(3, late), false, "", "a record right after a rise: the kill already counted"},
		{s, oomAt(4, late), false, "oom firing began+30s kills=1", "not this kill's"},
		{s, oomAt(4, newer), false, "", "logged after a rise again"},
		{s, oomAt(4, newer), false, "", "quiet"},
		{s, oomAt(5, Victim{PID: 99, Name: "x", Seq: 500}), false, "oom firing began+45s kills=1 victim=x/99", "a record and its rise in one poll"},
	})
}

func TestOOMRuleStateWhileAPushIsPending(t *testing.T) {
	rule, _ := NewOOMRule(OOMConfig{})
	rule.Observe(oomAt(1, Victim{}), t0)
	for _, a := range rule.Observe(oomAt(2, Victim{}), t0.Add(time.Second)) {
		rule.Pushed(a, false, t0.Add(time.Second))
	}
	if st := rule.State(); st.Armed || !st.Since.Equal(t0.Add(time.Second)) {
		t.Errorf("state %+v while a kill waits for a push", st)
	}
}

func TestActivePhase(t *testing.T) {
	for _, tc := range []struct {
		phases []phaseapi.Phase
		want   string
	}{
		{nil, ""},
		{[]phaseapi.Phase{{Name: "a", Status: phaseapi.StatusFailed, Started: t0.Add(time.Hour)}}, ""},
		{[]phaseapi.Phase{{Name: "a", Status: phaseapi.StatusActive, Started: t0}, {Name: "b", Status: phaseapi.StatusOK, Started: t0.Add(time.Hour)}}, "a"},
		{[]phaseapi.Phase{{Name: "b", Status: phaseapi.StatusActive, Started: t0.Add(time.Hour)}, {Name: "a", Status: phaseapi.StatusActive, Started: t0}}, "b"},
	} {
		p, ok := Sample{Phases: tc.phases}.ActivePhase()
		if p.Name != tc.want || ok != (tc.want != "") {
			t.Errorf("%+v: %q %v, want %q", tc.phases, p.Name, ok, tc.want)
		}
	}
}

// TestSwapRuleRearmsStrictlyBelowTheBand: a ratio exactly threshold minus
// hysteresis is still inside the band, so the rule stays disarmed there and
// re-arms only below it. 0.5 - 0.25 is exact in binary, so the edge is sharp.
func TestSwapRuleRearmsStrictlyBelowTheBand(t *testing.T) {
	rule, err := NewSwapRule(SwapConfig{Threshold: 0.5, Hysteresis: 0.25, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runScript(t, rule, []step{
		{s: swapAt(0.5), want: "swap firing began+0s", why: "at the threshold"},
		{after: time.Minute, s: swapAt(0.25), why: "exactly at the band's lower edge: still disarmed"},
		{after: time.Minute, s: swapAt(0.5), why: "back at the threshold without having re-armed: no push"},
		{after: time.Minute, s: swapAt(0.24), want: "swap resolved began+0s", why: "below the band: re-armed"},
		{after: time.Minute, s: swapAt(0.5), want: "swap firing began+4m0s", why: "a new incident"},
	})
}

// TestRuleStateSaysAPushNoPhoneTook: a rule that pushed, where every
// target failed, is undelivered while it retries (the status page must
// not say "pushed"), and no longer once a push reaches a phone.
func TestRuleStateSaysAPushNoPhoneTook(t *testing.T) {
	r, err := NewSwapRule(SwapConfig{Threshold: 0.5, Hysteresis: 0.1, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	state := func(step string, want RuleState) {
		t.Helper()
		if got := r.State(); got.Armed != want.Armed || got.Undelivered != want.Undelivered {
			t.Errorf("%s: armed %v, undelivered %v; want %v, %v", step, got.Armed, got.Undelivered, want.Armed, want.Undelivered)
		}
	}
	state("before", RuleState{Armed: true})
	alerts := r.Observe(swapAt(0.6), t0)
	if len(alerts) != 1 {
		t.Fatalf("%d alerts, want 1", len(alerts))
	}
	state("a push on its way", RuleState{})
	r.Pushed(alerts[0], false, t0)
	state("every target failed", RuleState{Undelivered: true})
	alerts = r.Observe(swapAt(0.6), t0.Add(5*time.Second))
	if len(alerts) != 1 {
		t.Fatalf("retry: %d alerts, want 1", len(alerts))
	}
	r.Pushed(alerts[0], true, t0.Add(5*time.Second))
	state("the retry reached the phone", RuleState{})

	// An event rule's outbox the same: a failed phase whose push failed.
	rules, err := NewPhaseRules(PhaseConfig{Notify: []string{string(RuleFailed)}, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	failed := rules[0]
	end := phaseapi.PhaseEnd{Seq: 1, Phase: "P", Status: phaseapi.StatusFailed, Reason: "RuntimeError: x", Started: t0, Ended: t0}
	failed.Observe(Sample{}, t0) // the ends before the first look are old news
	out := failed.Observe(Sample{Ends: []phaseapi.PhaseEnd{end}}, t0.Add(time.Second))
	if len(out) != 1 {
		t.Fatalf("failed rule: %d alerts, want 1", len(out))
	}
	failed.Pushed(out[0], false, t0.Add(3*time.Second))
	if st := failed.State(); st.Armed || !st.Undelivered {
		t.Errorf("failed rule after a push no target took: %+v, want undelivered", st)
	}
}
