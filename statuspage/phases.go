package statuspage

import (
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/watchdog"
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
// decide it, with the same stall time; resumed is when this process took
// the phases' run over from a stopped one (phaseapi.Run.Resumed).
func newPhase(p phaseapi.Phase, now, resumed time.Time, stallAfter time.Duration) Phase {
	out := Phase{Phase: p}
	if since, onStep, ok := watchdog.Stalled(p, now, resumed, stallAfter); ok {
		out.Stalled = &Stall{Since: since, OnStep: onStep}
	}
	return out
}

// Running reports whether the phase has not ended.
func (p Phase) Running() bool { return p.Active() }

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
