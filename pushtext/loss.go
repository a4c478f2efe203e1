package pushtext

import (
	"math"
	"strconv"

	"github.com/lavender-ml/lavender/watchdog"
)

// LossFigures describe a phase whose training loss turned non-finite.
type LossFigures struct {
	Phase string
	Loss  float64 // NaN, +Inf or -Inf
	// The step it was at, if it reports steps; Total 0: unknown.
	HasStep     bool
	Step, Total int64
}

// Loss is `phase "Pretrain 1/3" loss is NaN at step 1200/5000 — training
// diverged`; subject "loss Pretrain 1/3".
func Loss(l LossFigures) Text {
	text := "phase " + strconv.Quote(phaseName(l.Phase)) + " loss is " + lossWord(l.Loss)
	if l.HasStep {
		text += " at step " + strconv.FormatInt(l.Step, 10)
		if l.Total > 0 {
			text += "/" + strconv.FormatInt(l.Total, 10)
		}
	}
	return Text{Body: text + " — training diverged", Subject: string(watchdog.RuleLoss) + " " + phaseName(l.Phase)}
}

func lossWord(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', 4, 64)
}

// watchdogLoss is the text of the loss rule's alert, from the sample that
// raised it.
func watchdogLoss(a watchdog.Alert) Text {
	l := LossFigures{Phase: a.Phase, Loss: math.NaN()}
	if p, ok := a.SampledPhase(); ok {
		l.Loss = 0
		if p.Loss != nil {
			l.Loss = float64(*p.Loss)
		}
		l.HasStep, l.Step, l.Total = p.HasStep(), int64(min(p.StepNow(), math.MaxInt64)), int64(min(p.Total, math.MaxInt64))
	}
	return Loss(l)
}
