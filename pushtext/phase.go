package pushtext

import (
	"math"
	"strconv"
	"time"

	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/watchdog"
)

// maxPhaseBytes bounds the phase name in a push: the phase server takes no
// longer one, but a webhook's annotation can carry anything.
const maxPhaseBytes = 64

// PhaseFigures describe a phase event: it failed, stalled or is done.
type PhaseFigures struct {
	Event watchdog.RuleName // watchdog.RuleFailed, RuleStalled or RuleDone
	Phase string
	// Duration: for failed and done, how long the phase ran; for stalled,
	// how long the stall has lasted.
	Duration time.Duration
	// Stall is what a stalled phase stopped on: its heartbeat (also when
	// empty), or, while heartbeats came, its step, an evaluation or work
	// between steps. Step and Total (0: unknown) are where the phase was;
	// EvalStep and EvalTotal (0: unknown) where its evaluation was for
	// StallEval; Busy names the work for StallBusy ("evaluating").
	Stall               watchdog.StallKind
	Step, Total         int64
	EvalStep, EvalTotal int64
	Busy                string

	// Ending says how a failed phase ended (see failed.go).
	Ending
}

// Phase is `phase "Pretrain 1/3" failed after 4h12m`, `… stalled: no
// heartbeat for 10m`, `… stalled: step 1200/5000 for 10m` (see stalled)
// or `… done in 4h12m`; subject "failed Pretrain 1/3" (the run log
// shortens a long name with "…" and keeps its "sent ok= fail=" tail
// whole).
func Phase(p PhaseFigures) Text {
	text := "phase " + strconv.Quote(phaseName(p.Phase)) + " "
	d := HumanDuration(p.Duration)
	switch p.Event {
	case watchdog.RuleFailed:
		text += failed(p.Ending, d)
	case watchdog.RuleDone:
		text += "done in " + d
		if p.Loss != nil {
			// The loss rule pushed the divergence already; the last push
			// on the phone must not read as a good run.
			text += ", but its loss is " + lossWord(*p.Loss) + " — training diverged"
		}
	default:
		text += "stalled: " + stalled(p, d)
	}
	return Text{Body: text, Subject: phaseSubject(p)}
}

// stalled is what follows "stalled: ", after lasted, how long the stall
// has lasted: "no heartbeat for 10m", or while heartbeats came "step
// 1200/5000 for 10m" ("step 1200 for 10m" without a total), "step
// 1200/5000, eval 37/200 for 10m" when an evaluation moved last and then
// stopped, "step 1200/5000, evaluating for 10m" when work between steps
// (compute_metrics, a save) was last seen moving and then stopped.
func stalled(p PhaseFigures, lasted string) string {
	switch p.Stall {
	case watchdog.StallStep, watchdog.StallEval, watchdog.StallBusy:
	default:
		return "no heartbeat for " + lasted
	}
	where := "step " + strconv.FormatInt(p.Step, 10)
	if p.Total > 0 {
		where += "/" + strconv.FormatInt(p.Total, 10)
	}
	switch p.Stall {
	case watchdog.StallBusy:
		where += ", " + p.Busy
	case watchdog.StallEval:
		where += ", eval " + strconv.FormatInt(p.EvalStep, 10)
		if p.EvalTotal > 0 {
			where += "/" + strconv.FormatInt(p.EvalTotal, 10)
		}
	}
	return where + " for " + lasted
}

func phaseSubject(p PhaseFigures) string {
	if p.Event == watchdog.RuleFailed && p.Unwatched && p.Count <= 1 {
		return "ended " + phaseName(p.Phase) // not known to have failed
	}
	return string(p.Event) + " " + phaseName(p.Phase)
}

// phaseName keeps a phase name on one short line.
func phaseName(name string) string {
	name = oneLine(name)
	if name == "" {
		return "?"
	}
	return textsafe.Truncate(name, maxPhaseBytes)
}

// watchdogPhase is the text of a phase rule's alert.
func watchdogPhase(a watchdog.Alert) Text {
	p := PhaseFigures{Event: a.Rule, Phase: a.Phase}
	switch a.Rule {
	case watchdog.RuleFailed, watchdog.RuleDone:
		p.Duration = a.PhaseDuration()
		p.Ending = endingOf(a)
		return Phase(p)
	}
	// A stall is worded from the sample that raised it.
	p.Duration, p.Stall = a.Lasted(), a.Stall
	if ph, ok := a.SampledPhase(); ok {
		p.Step, p.Total = stepCount(ph.StepNow()), stepCount(ph.Total)
		if ph.EvalStep != nil {
			p.EvalStep, p.EvalTotal = stepCount(*ph.EvalStep), stepCount(ph.EvalTotal)
		}
		p.Busy = ph.Busy
	}
	return Phase(p)
}

// stepCount is a step count of the API (uint64) as the texts take it.
func stepCount(n uint64) int64 { return int64(min(n, math.MaxInt64)) }
