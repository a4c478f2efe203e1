package pushtext

import (
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/watchdog"
)

// TestStallTexts: a stall is worded from what the phase stopped on and
// the figures of the sample that raised it, and the same figures read off
// an Alertmanager alert read alike.
func TestStallTexts(t *testing.T) {
	began := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	stalled := func(kind watchdog.StallKind, lasted time.Duration, p phaseapi.Phase) watchdog.Alert {
		p.Name, p.Status = "Finetune", phaseapi.StatusActive
		return watchdog.Alert{Rule: watchdog.RuleStalled, Status: watchdog.Firing, Began: began, At: began.Add(lasted),
			Phase: p.Name, Stall: kind, Sample: watchdog.Sample{Phases: []phaseapi.Phase{p}}}
	}
	steps := func(step, total uint64) phaseapi.Phase {
		p := phaseapi.Phase{Progress: phaseapi.Progress{Total: total}}
		if step > 0 || total == 0 {
			p.Step = &step
		}
		return p
	}
	eval := func(p phaseapi.Phase, step, total uint64) phaseapi.Phase {
		p.EvalStep, p.EvalTotal = &step, total
		return p
	}
	busy := steps(10, 15)
	busy.Busy = "evaluating"
	for _, tc := range []struct {
		name string
		a    watchdog.Alert
		want string
	}{
		{"no heartbeat", stalled(watchdog.StallHeartbeat, 10*time.Minute+5*time.Second, steps(1200, 5000)),
			`phase "Finetune" stalled: no heartbeat for 10m`},
		{"a kind not given is a silence", stalled("", 20*time.Minute, steps(1200, 5000)),
			`phase "Finetune" stalled: no heartbeat for 20m`},
		{"on its step", stalled(watchdog.StallStep, 10*time.Minute+5*time.Second, steps(1200, 5000)),
			`phase "Finetune" stalled: step 1200/5000 for 10m`},
		{"on its step, no total", stalled(watchdog.StallStep, 66*time.Second, steps(0, 0)),
			`phase "Finetune" stalled: step 0 for 1m`},
		{"before the first step", stalled(watchdog.StallStep, 65*time.Second, steps(0, 5000)),
			`phase "Finetune" stalled: step 0/5000 for 1m`},
		{"in an evaluation", stalled(watchdog.StallEval, 11*time.Minute, eval(steps(1200, 5000), 199, 200)),
			`phase "Finetune" stalled: step 1200/5000, eval 199/200 for 11m`},
		{"in an evaluation of no known length", stalled(watchdog.StallEval, 62*time.Second, eval(steps(0, 0), 1, 0)),
			`phase "Finetune" stalled: step 0, eval 1 for 1m`},
		{"in work between steps", stalled(watchdog.StallBusy, 10*time.Minute+5*time.Second, busy),
			`phase "Finetune" stalled: step 10/15, evaluating for 10m`},
	} {
		got := Alert(tc.a)
		if got.Body != tc.want || got.Subject != "stalled Finetune" {
			t.Errorf("%s: %q (%q), want %q", tc.name, got.Body, got.Subject, tc.want)
		}
	}
	// The step stall of an Alertmanager alert: the same figures, the
	// same words.
	webhook := Phase(PhaseFigures{Event: watchdog.RuleStalled, Phase: "Finetune", Duration: 10 * time.Minute, Stall: watchdog.StallStep, Step: 1200, Total: 5000})
	if want := `phase "Finetune" stalled: step 1200/5000 for 10m`; webhook.Body != want {
		t.Errorf("from figures: %q, want %q", webhook.Body, want)
	}
}
