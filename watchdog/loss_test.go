package watchdog

import (
	"math"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

func withLoss(p phaseapi.Phase, loss float64) phaseapi.Phase {
	l := phaseapi.Loss(loss)
	p.Loss = &l
	return p
}

func withEval(p phaseapi.Phase, step, total uint64, movedAt time.Duration) phaseapi.Phase {
	p.EvalStep, p.EvalTotal, p.EvalProgressAt = &step, total, at(movedAt)
	return p
}

// The loss rule pushes once per run of a phase when its loss turns NaN or
// infinite, whatever it does next; a run already over at the first sample
// is old news.
func TestPhaseLossRule(t *testing.T) {
	r := phaseRule(t, PhaseConfig{Repeat: 10 * m, Retry: 5 * time.Second}, RuleLoss)
	nan, inf := math.NaN(), math.Inf(1)
	train := func(last time.Duration, step uint64, loss float64) phaseapi.Phase {
		return withLoss(withStep(active("Pretrain 1/3", 0, last), step, 5000, last), loss)
	}
	old := withLoss(ended("Old", phaseapi.StatusOK, -2*h, -h), nan)
	runPhaseScript(t, r, []phaseStep{
		{0, []phaseapi.Phase{old, train(0, 0, 2.5)}, false, nil, "a finite loss; an old run's NaN is not news"},
		{10 * m, []phaseapi.Phase{old, train(10*m, 1200, nan)}, false,
			[]string{`firing: "Pretrain 1/3" loss is NaN at step 1200/5000`}, "NaN"},
		{11 * m, []phaseapi.Phase{old, train(11*m, 1210, nan)}, false, nil, "still NaN: once"},
		{12 * m, []phaseapi.Phase{old, train(12*m, 1220, 2.0)}, false, nil, "finite again"},
		{13 * m, []phaseapi.Phase{old, train(13*m, 1230, inf)}, false, nil, "non-finite again in the same run: still once"},
		{2 * h, []phaseapi.Phase{old, withLoss(withStep(active("Pretrain 1/3", 2*h, 2*h), 5, 5000, 2*h), -inf)}, true,
			[]string{`firing: "Pretrain 1/3" loss is -Inf at step 5/5000`}, "a new run diverges; no target takes it"},
		{2*h + 2*time.Second, []phaseapi.Phase{old, withLoss(withStep(active("Pretrain 1/3", 2*h, 2*h), 5, 5000, 2*h), -inf)}, false, nil, "backoff"},
		{2*h + 5*time.Second, []phaseapi.Phase{old, withLoss(withStep(active("Pretrain 1/3", 2*h, 2*h), 5, 5000, 2*h), -inf)}, false,
			[]string{`firing: "Pretrain 1/3" loss is -Inf at step 5/5000`}, "retried, delivered"},
		{3 * h, []phaseapi.Phase{old, withLoss(ended("Finetune", phaseapi.StatusOK, 2*h+h/2, 3*h), inf)}, false,
			[]string{`firing: "Finetune" loss is +Inf`}, "a short run that ended with an infinite loss"},
	})
}

// An evaluation's progress is movement: a slow evaluation between two steps
// is not a stall, a hung one is, and the push says where it hung.
func TestPhaseStallWithEvaluation(t *testing.T) {
	r := phaseRule(t, PhaseConfig{StallAfter: 10 * m}, RuleStalled)
	evaluating := func(now time.Duration, evalStep uint64, evalAt time.Duration) []phaseapi.Phase {
		return []phaseapi.Phase{withEval(withStep(active("Finetune", 0, now), 1200, 5000, 0), evalStep, 200, evalAt)}
	}
	runPhaseScript(t, r, []phaseStep{
		{12 * m, evaluating(12*m, 150, 11*m), false, nil, "a 12-minute evaluation that moves"},
		{25 * m, evaluating(25*m, 199, 24*m), false, nil, "still moving"},
		{35 * m, evaluating(35*m, 199, 24*m), false,
			[]string{`firing: "Finetune" stalled on eval at step 1200/5000, eval 199/200 for 11m0s`}, "the evaluation hung"},
	})
	// The step and the evaluation's first batches came in one ping, and
	// then nothing moved: the push still says where the evaluation stood.
	r = phaseRule(t, PhaseConfig{StallAfter: 10 * m}, RuleStalled)
	runPhaseScript(t, r, []phaseStep{
		{11 * m, []phaseapi.Phase{withEval(withStep(active("Finetune", 0, 11*m), 2, 6, m), 3, 40, m)}, false,
			[]string{`firing: "Finetune" stalled on eval at step 2/6, eval 3/40 for 10m0s`}, "hung at eval batch 3"},
	})
}

// A phase that told its total and no step yet is at step 0 since its
// start: a hang before the first step stalls, as a phase with step 0 does.
// One that tells no total and no step can stall only by silence.
func TestPhaseStallBeforeTheFirstStep(t *testing.T) {
	r := phaseRule(t, PhaseConfig{StallAfter: time.Minute}, RuleStalled)
	total := active("Total only", 0, 0)
	total.Total = 5000
	pinged := func(p phaseapi.Phase, last time.Duration) phaseapi.Phase { p.LastHeartbeat = at(last); return p }
	runPhaseScript(t, r, []phaseStep{
		{50 * time.Second, []phaseapi.Phase{pinged(total, 50*time.Second), withStep(active("Step 0", 0, 50*time.Second), 0, 5000, 0),
			active("Shell", 0, 50*time.Second)}, false, nil, "pinging, under a minute"},
		{65 * time.Second, []phaseapi.Phase{pinged(total, 60*time.Second), withStep(active("Step 0", 0, 60*time.Second), 0, 5000, 0),
			active("Shell", 0, 60*time.Second)}, false, []string{
			`firing: "Total only" stalled on step at step 0/5000 for 1m5s`,
			`firing: "Step 0" stalled on step at step 0/5000 for 1m5s`}, "a hang before the first step stalls; the shell phase does not"},
	})
}

// The Python client's phases are at step 0 from their start, total or not
// (the docs' plain loop tells its total at the first progress() only, and
// Lightning learns it after the sanity check): a hang on the first batch,
// or in the sanity check's validation before it, stalls on step 0.
func TestPhaseStallBeforeTheFirstStepWithoutTotal(t *testing.T) {
	r := phaseRule(t, PhaseConfig{StallAfter: time.Minute}, RuleStalled)
	firstBatch := func(last time.Duration) phaseapi.Phase { return withStep(active("Plain loop", 0, last), 0, 0, 0) }
	sanity := func(last time.Duration) phaseapi.Phase {
		return withEval(withStep(active("Lightning", 0, last), 0, 0, 0), 1, 2, 10*time.Second)
	}
	runPhaseScript(t, r, []phaseStep{
		{50 * time.Second, []phaseapi.Phase{firstBatch(50 * time.Second), sanity(50 * time.Second)}, false, nil, "pinging, under a minute"},
		{66 * time.Second, []phaseapi.Phase{firstBatch(60 * time.Second), sanity(60 * time.Second)}, false, []string{
			`firing: "Plain loop" stalled on step at step 0/0 for 1m6s`}, "the first batch hangs; the sanity check moved 56s ago"},
		{72 * time.Second, []phaseapi.Phase{firstBatch(72 * time.Second), sanity(72 * time.Second)}, false, []string{
			`firing: "Lightning" stalled on eval at step 0/0, eval 1/2 for 1m2s`}, "the sanity check's second batch hangs"},
	})
}
