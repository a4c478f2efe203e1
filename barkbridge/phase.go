package barkbridge

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/alertmanager/template"

	"lavender/runlog"
	"lavender/watchdog"
)

// The Prometheus alerts that carry the same texts as the watchdog's phase
// rules (alerts.yml), and their machine-readable annotations: plain whole
// numbers of seconds and steps.
const (
	PhaseFailedAlertname          = "PhaseFailed"
	PhaseStalledAlertname         = "PhaseStalled"
	PhaseProgressStalledAlertname = "PhaseProgressStalled"

	annotationPhase          = "phase"
	annotationPhaseDuration  = "duration_seconds"
	annotationStalledSeconds = "stalled_seconds"
	annotationStep           = "step"
	annotationTotalSteps     = "total_steps"

	// maxPhaseBytes bounds the phase name in a push: the exporter takes no
	// longer one (phaseapi.MaxPhaseNameBytes), but a webhook's annotation
	// can carry anything.
	maxPhaseBytes = 64
)

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

	// Reason is why a failed phase ended, "" if unknown. Died marks a
	// phase whose process (PID) was gone without an end. Count > 1 is a
	// push that counts several failures within Window.
	Reason string
	Died   bool
	PID    int64
	Count  int
	Window time.Duration
}

// phaseText is `phase "Pretrain 1/3" failed after 4h12m`, `… stalled: no
// heartbeat for 10m`, `… stalled: step 1200/5000 for 10m` or `… done in
// 4h12m`.
func phaseText(p PhaseFigures) string {
	text := "phase " + strconv.Quote(phaseName(p.Phase)) + " "
	d := watchdog.HumanDuration(p.Duration)
	switch p.Event {
	case watchdog.PhaseRuleFailed:
		return text + failedText(p, d)
	case watchdog.PhaseRuleDone:
		return text + "done in " + d
	}
	return text + "stalled: " + stallKind(p.OnStep, p.Step, p.Total, d)
}

// failedText is what follows the name of a failed phase: "failed after
// 2h13m: RuntimeError: …", "died without ending after 12m (pid 4242
// gone)", or "failed 3 times in 10m: …" with the latest reason.
func failedText(p PhaseFigures, d string) string {
	reason := strings.Join(strings.Fields(sanitizeMessage(p.Reason)), " ")
	var text string
	switch {
	case p.Count > 1:
		text = "failed " + strconv.Itoa(p.Count) + " times in " + watchdog.HumanDuration(p.Window)
	case p.Died:
		return "died without ending after " + d + " (pid " + strconv.FormatInt(p.PID, 10) + " gone)"
	default:
		text = "failed after " + d
	}
	if reason != "" {
		text += ": " + reason
	}
	return text
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

// phaseSubject names a phase push in the run log: "failed Pretrain 1/3".
// subject() shortens a long name with "…"; the line's "sent ok= fail="
// tail stays whole.
func phaseSubject(p PhaseFigures) string { return p.Event + " " + phaseName(p.Phase) }

// phaseName keeps a phase name on one short line.
func phaseName(name string) string {
	name = strings.Join(strings.Fields(sanitizeMessage(name)), " ")
	if name == "" {
		return "?"
	}
	return runlog.Truncate(name, maxPhaseBytes)
}

// watchdogPhaseText is the text and run-log subject of a phase rule's
// alert.
func watchdogPhaseText(a watchdog.Alert) (text, subj string) {
	p := PhaseFigures{Event: a.Rule, Phase: a.Phase}
	switch a.Rule {
	case watchdog.PhaseRuleFailed, watchdog.PhaseRuleDone:
		p.Duration = a.PhaseDuration()
		p.Reason, p.Died, p.PID = a.End.Reason, a.End.Died, a.End.PID
		if a.Ends > 1 {
			p.Count, p.Window = a.Ends, a.Lasted()
		}
		return phaseText(p), phaseSubject(p)
	}
	// The watchdog words the stall itself, from the sample that raised it.
	return "phase " + strconv.Quote(phaseName(a.Phase)) + " stalled: " + a.StallKind(), phaseSubject(p)
}

// phaseFromAnnotations reads the annotations of PhaseFailed, PhaseStalled
// and PhaseProgressStalled; ok is false for another alert, or without a
// phase and a usable number of seconds (and, for the step stall, of steps).
func phaseFromAnnotations(name string, a template.KV) (PhaseFigures, bool) {
	phase := strings.TrimSpace(a[annotationPhase])
	if phase == "" {
		return PhaseFigures{}, false
	}
	switch name {
	case PhaseFailedAlertname:
		d, ok := parseSeconds(a[annotationPhaseDuration])
		return PhaseFigures{Event: watchdog.PhaseRuleFailed, Phase: phase, Duration: d}, ok
	case PhaseStalledAlertname:
		d, ok := parseSeconds(a[annotationStalledSeconds])
		return PhaseFigures{Event: watchdog.PhaseRuleStalled, Phase: phase, Duration: d}, ok
	case PhaseProgressStalledAlertname:
		d, ok := parseSeconds(a[annotationStalledSeconds])
		step, sok := parseCount(a[annotationStep])
		if !ok || !sok {
			return PhaseFigures{}, false
		}
		p := PhaseFigures{Event: watchdog.PhaseRuleStalled, Phase: phase, Duration: d, OnStep: true, Step: step}
		// total_steps is empty for a phase that never reported a total; a
		// total below the step is no total.
		if total, ok := parseCount(a[annotationTotalSteps]); ok && total >= 1 && total >= step {
			p.Total = total
		}
		return p, true
	}
	return PhaseFigures{}, false
}

// parseSeconds reads a plain decimal number of seconds, at most ten years.
func parseSeconds(v string) (time.Duration, bool) {
	f, ok := parseDecimal(strings.TrimSpace(v))
	if !ok || f < 0 || f > 10*365*24*3600 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// parseCount reads a plain whole number of steps.
func parseCount(v string) (int64, bool) {
	n, ok := parseBytes(v)
	if !ok || n > 1<<62 {
		return 0, false
	}
	return int64(n), true
}

// eventAlert reports whether an alert marks an event rather than a state:
// its resolution says nothing ("resolved: PhaseFailed" only means the
// rule's window passed), so it is never pushed.
func eventAlert(name string) bool {
	return name == PhaseFailedAlertname || name == OOMAlertname
}
