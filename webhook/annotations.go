package webhook

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/alertmanager/template"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/watchdog"
)

// The Prometheus alerts that carry the same texts as the watchdog's rules
// (alerts.yml), and their machine-readable annotations: plain decimals,
// whole numbers of seconds and steps. The bridge reads the figures from
// them and words them with pushtext, as the watchdog's alerts are.
const (
	PressureAlertname             = "MemoryPressureHigh"
	OOMAlertname                  = "OOMKill"
	PhaseFailedAlertname          = "PhaseFailed"
	PhaseStalledAlertname         = "PhaseStalled"
	PhaseProgressStalledAlertname = "PhaseProgressStalled"
	PhaseLossAlertname            = "PhaseLossNotFinite"

	annotationRatio          = "swap_used_ratio"
	annotationUsed           = "swap_used_bytes"
	annotationTotal          = "swap_total_bytes"
	annotationSwapThreshold  = "swap_threshold_ratio"
	annotationSumm           = "summary"
	annotationPressure       = "pressure_ratio"
	annotationPressureWindow = "pressure_window_seconds"
	annotationOOMKills       = "oom_kills"
	annotationActivePhase    = "active_phase"
	annotationPhase          = "phase"
	annotationPhaseDuration  = "duration_seconds"
	annotationPhaseReason    = "reason"
	annotationStalledSeconds = "stalled_seconds"
	annotationStep           = "step"
	annotationTotalSteps     = "total_steps"
	annotationLoss           = "loss"
)

// swapFromAnnotations reads the figures alerts.yml puts on the swap alert.
// Values come from Prometheus templates, so "1.7501e+10" and "54%" are
// accepted as well as plain numbers, but not hex floats, "inf" or "nan".
// ok is false when no usable ratio can be had, from the ratio annotation or
// from the two byte counts.
func swapFromAnnotations(a template.KV) (pushtext.SwapFigures, bool) {
	var s pushtext.SwapFigures
	used, uok := parseBytes(a[annotationUsed])
	total, tok := parseBytes(a[annotationTotal])
	if uok && tok && total > 0 && used <= total {
		s.UsedBytes, s.TotalBytes = used, total
	}
	if r, ok := parseRatio(a[annotationRatio]); ok {
		s.Ratio = r
		return s, true
	}
	if s.BytesKnown() {
		s.Ratio = float64(s.UsedBytes) / float64(s.TotalBytes)
		return s, true
	}
	return s, false
}

func parseRatio(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	scale := 1.0
	if p, ok := strings.CutSuffix(v, "%"); ok {
		v, scale = strings.TrimSpace(p), 100
	}
	f, ok := parseDecimal(v)
	if !ok {
		return 0, false
	}
	f /= scale
	return f, pushtext.UsableRatio(f)
}

func parseBytes(v string) (uint64, bool) {
	f, ok := parseDecimal(strings.TrimSpace(v))
	if !ok || math.IsNaN(f) || f < 0 || f >= 1<<63 {
		return 0, false
	}
	return uint64(math.Round(f)), true
}

// plainDecimal is what Prometheus's templates write: digits, an optional
// fraction and exponent. strconv.ParseFloat alone would also take "0x1p-1"
// (hex), "inf" and "nan", which would push a number nobody wrote.
var plainDecimal = lazyregexp.New(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

func parseDecimal(v string) (float64, bool) {
	if !plainDecimal.MatchString(v) {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

// swapFromBytes reads the swap byte annotations the pressure and OOM
// alerts carry. ok is false when they are missing or do not make sense; a
// total of 0 is a host without swap.
func swapFromBytes(a template.KV) (pushtext.SwapFigures, bool) {
	used, uok := parseBytes(a[annotationUsed])
	total, tok := parseBytes(a[annotationTotal])
	switch {
	case !uok || !tok:
		return pushtext.SwapFigures{}, false
	case total == 0:
		return pushtext.SwapFigures{}, true
	case used > total:
		return pushtext.SwapFigures{}, false
	}
	return pushtext.SwapFigures{Ratio: float64(used) / float64(total), UsedBytes: used, TotalBytes: total}, true
}

// pressureFromAnnotations reads MemoryPressureHigh's annotations; ok is
// false without a usable pressure_ratio.
func pressureFromAnnotations(a template.KV) (pushtext.PressureFigures, bool) {
	r, ok := parseRatio(a[annotationPressure])
	if !ok {
		return pushtext.PressureFigures{}, false
	}
	p := pushtext.PressureFigures{Ratio: r, Window: time.Minute}
	if w, ok := parseDecimal(strings.TrimSpace(a[annotationPressureWindow])); ok && w > 0 && w < 1e6 {
		p.Window = time.Duration(w * float64(time.Second))
	}
	p.Swap, p.SwapKnown = swapFromBytes(a)
	return p, true
}

// oomFromAnnotations reads OOMKill's annotations; ok is false without a
// usable oom_kills count.
func oomFromAnnotations(a template.KV) (pushtext.OOMFigures, bool) {
	n, ok := parseBytes(a[annotationOOMKills])
	if !ok || n == 0 {
		return pushtext.OOMFigures{}, false
	}
	// The phase running at the time (active_phase) is not said: that it
	// ran does not make the victim its process.
	o := pushtext.OOMFigures{Kills: n}
	o.Swap, o.SwapKnown = swapFromBytes(a)
	return o, true
}

// phaseFromAnnotations reads the annotations of PhaseFailed, PhaseStalled
// and PhaseProgressStalled; ok is false for another alert, or without a
// phase and a usable number of seconds (and, for the step stall, of steps).
func phaseFromAnnotations(name string, a template.KV) (pushtext.PhaseFigures, bool) {
	phase := strings.TrimSpace(a[annotationPhase])
	if phase == "" {
		return pushtext.PhaseFigures{}, false
	}
	switch name {
	case PhaseFailedAlertname:
		d, ok := parseSeconds(a[annotationPhaseDuration])
		// The reason is the phase's end's, as lavender_phase_failure_info
		// carries it: cleaned again, as any text from outside is.
		p := pushtext.PhaseFigures{Event: watchdog.RuleFailed, Phase: phase, Duration: d}
		p.Reason = phaseapi.CleanReason(a[annotationPhaseReason])
		return p, ok
	case PhaseStalledAlertname:
		d, ok := parseSeconds(a[annotationStalledSeconds])
		return pushtext.PhaseFigures{Event: watchdog.RuleStalled, Phase: phase, Duration: d}, ok
	case PhaseProgressStalledAlertname:
		d, ok := parseSeconds(a[annotationStalledSeconds])
		step, sok := parseCount(a[annotationStep])
		if !ok || !sok {
			return pushtext.PhaseFigures{}, false
		}
		p := pushtext.PhaseFigures{Event: watchdog.RuleStalled, Phase: phase, Duration: d, Stall: watchdog.StallStep, Step: step}
		// total_steps is empty for a phase that never reported a total; a
		// total below the step is no total.
		if total, ok := parseCount(a[annotationTotalSteps]); ok && total >= 1 && total >= step {
			p.Total = total
		}
		return p, true
	}
	return pushtext.PhaseFigures{}, false
}

// lossFromAnnotations reads PhaseLossNotFinite's annotations; ok is false
// without a phase, or with a loss that is not NaN or infinite (a rule of
// the user's that fires on a number is told by its summary). step and
// total_steps are empty for a phase that reports no steps.
func lossFromAnnotations(a template.KV) (pushtext.LossFigures, bool) {
	phase := strings.TrimSpace(a[annotationPhase])
	loss, ok := parseNonFinite(a[annotationLoss])
	if phase == "" || !ok {
		return pushtext.LossFigures{}, false
	}
	l := pushtext.LossFigures{Phase: phase, Loss: loss}
	if step, ok := parseCount(a[annotationStep]); ok {
		l.HasStep, l.Step = true, step
		if total, ok := parseCount(a[annotationTotalSteps]); ok && total >= 1 && total >= step {
			l.Total = total
		}
	}
	return l, true
}

// parseNonFinite reads what Prometheus's templates print for a value that
// is not a number: "NaN", "+Inf", "-Inf" (and "Inf", any case). Anything
// else, a number included, is not.
func parseNonFinite(v string) (float64, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "nan":
		return math.NaN(), true
	case "inf", "+inf":
		return math.Inf(1), true
	case "-inf":
		return math.Inf(-1), true
	}
	return 0, false
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
	switch name {
	case PhaseFailedAlertname, PhaseLossAlertname, OOMAlertname, GPUXidAlertname, GPUFallenOffAlertname, StorageErrorsAlertname:
		return true
	}
	return false
}
