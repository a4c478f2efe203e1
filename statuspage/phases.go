package statuspage

import (
	"math"
	"time"

	"lavender/phaseapi"
	"lavender/watchdog"
)

// Phase is a phase as the exporter reports it, with what the page derives
// from it: whether it is stalled, and since when. The JSON keeps every
// field of phaseapi.Phase where it was and adds "stalled".
type Phase struct {
	phaseapi.Phase
	Stalled *Stall `json:"stalled,omitempty"` // nil unless the phase is running and stalled
}

// Stall says since when a running phase has been stalled, and on what:
// no heartbeat (OnStep false), or pings without a new step (OnStep true).
type Stall struct {
	Since  time.Time `json:"since"`
	OnStep bool      `json:"on_step"`
}

// newPhase marks p stalled at now as the watchdog's stalled rule would
// decide it, with the same stall time.
func newPhase(p phaseapi.Phase, now time.Time, stallAfter time.Duration) Phase {
	out := Phase{Phase: p}
	if since, onStep, ok := watchdog.Stalled(PhaseState(p), now, stallAfter); ok {
		out.Stalled = &Stall{Since: since, OnStep: onStep}
	}
	return out
}

// PhaseState is p as the watchdog's phase rules read it: the status page
// marks stalls with it, and serve's host reader feeds the watchdog with it,
// so the two read a phase alike.
func PhaseState(p phaseapi.Phase) watchdog.PhaseState {
	s := watchdog.PhaseState{
		Name:          p.Name,
		Status:        p.Status,
		Started:       p.Started,
		Ended:         p.Ended,
		LastHeartbeat: p.LastHeartbeat,
		HasStep:       p.HasStep(),
		Total:         clampInt64(p.Total),
		ProgressAt:    p.ProgressAt,
		Reason:        p.Reason,
		PID:           p.PID,
		Dirs:          p.Dirs,
	}
	if p.Active() && p.ETASeconds != nil && *p.ETASeconds > 0 {
		s.ETA = time.Duration(*p.ETASeconds * float64(time.Second))
	}
	if p.Step != nil {
		s.Step = clampInt64(*p.Step)
	}
	if p.SaveBytes != nil {
		s.HasSave, s.SaveBytes = true, *p.SaveBytes
	}
	if p.Loss != nil {
		s.HasLoss, s.Loss = true, float64(*p.Loss)
	}
	if p.EvalStep != nil {
		s.HasEval, s.EvalStep, s.EvalTotal, s.EvalProgressAt = true, clampInt64(*p.EvalStep), clampInt64(p.EvalTotal), p.EvalProgressAt
	}
	if p.Busy != "" {
		s.HasBusy, s.Busy, s.BusyAt = true, p.Busy, p.BusyAt
	}
	return s
}

func clampInt64(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

// Running reports whether the phase has not ended.
func (p Phase) Running() bool { return p.Active() }

// StepNow is the last step reported, 0 before any.
func (p Phase) StepNow() uint64 {
	if p.Step == nil {
		return 0
	}
	return *p.Step
}

// Fraction is the share of the steps done, 0–1; 0 without a total.
func (p Phase) Fraction() float64 {
	if p.Total == 0 {
		return 0
	}
	return min(float64(p.StepNow())/float64(p.Total), 1)
}

// ETA is the estimated time to the total, and whether there is one.
func (p Phase) ETA() (time.Duration, bool) {
	if !p.Active() || p.ETASeconds == nil {
		return 0, false
	}
	return time.Duration(*p.ETASeconds * float64(time.Second)), true
}

// HasETA reports whether the exporter could estimate the time to the total.
func (p Phase) HasETA() bool { _, ok := p.ETA(); return ok }

// ETADuration is the ETA, 0 without one.
func (p Phase) ETADuration() time.Duration { d, _ := p.ETA(); return d }
