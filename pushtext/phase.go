package pushtext

import (
	"strconv"
	"time"

	"lavender/internal/textsafe"
	"lavender/watchdog"
)

// maxPhaseBytes bounds the phase name in a push: the phase server takes no
// longer one, but a webhook's annotation can carry anything.
const maxPhaseBytes = 64

// PhaseFigures describe a phase event: it failed, stalled or is done.
type PhaseFigures struct {
	Event string // watchdog.PhaseRuleFailed, PhaseRuleStalled or PhaseRuleDone
	Phase string
	// Duration: for failed and done, how long the phase ran; for stalled,
	// how long the stall has lasted.
	Duration time.Duration
	// Stalled on its step while heartbeats came: the step, and the total
	// (0: unknown). Without OnStep a stall is a silence.
	OnStep      bool
	Step, Total int64

	// Ending says how a failed phase ended (see failed.go).
	Ending
}

// Phase is `phase "Pretrain 1/3" failed after 4h12m`, `… stalled: no
// heartbeat for 10m`, `… stalled: step 1200/5000 for 10m` or `… done in
// 4h12m`; subject "failed Pretrain 1/3" (the run log shortens a long name
// with "…" and keeps its "sent ok= fail=" tail whole).
func Phase(p PhaseFigures) Text {
	text := "phase " + strconv.Quote(phaseName(p.Phase)) + " "
	d := watchdog.HumanDuration(p.Duration)
	switch p.Event {
	case watchdog.PhaseRuleFailed:
		text += failed(p.Ending, d)
	case watchdog.PhaseRuleDone:
		text += "done in " + d
	default:
		text += "stalled: " + stallKind(p.OnStep, p.Step, p.Total, d)
	}
	return Text{Body: text, Subject: phaseSubject(p)}
}

// stallKind is what follows "stalled: ", worded as watchdog.Alert.StallKind.
func stallKind(onStep bool, step, total int64, lasted string) string {
	switch {
	case !onStep:
		return "no heartbeat for " + lasted
	case total > 0:
		return "step " + strconv.FormatInt(step, 10) + "/" + strconv.FormatInt(total, 10) + " for " + lasted
	}
	return "step " + strconv.FormatInt(step, 10) + " for " + lasted
}

func phaseSubject(p PhaseFigures) string { return p.Event + " " + phaseName(p.Phase) }

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
	case watchdog.PhaseRuleFailed, watchdog.PhaseRuleDone:
		p.Duration = a.PhaseDuration()
		p.Ending = endingOf(a)
		return Phase(p)
	}
	// The watchdog words the stall itself, from the sample that raised it.
	return Text{Body: "phase " + strconv.Quote(phaseName(a.Phase)) + " stalled: " + a.StallKind(), Subject: phaseSubject(p)}
}
