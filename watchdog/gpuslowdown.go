package watchdog

import (
	"time"

	"github.com/lavender-ml/lavender/gpu"
)

// GPUSlowdownRule pushes when the hardware has held a GPU's clocks down
// (HWSlowdown, HWThermalSlowdown or HWPowerBrakeSlowdown) at every poll
// for SlowdownAfter: a run slowed for a reason it cannot fix itself (heat,
// the power supply). The driver's power cap (SWPowerCap) is normal under
// full load and never counts. The host has one incident at a time, about
// the GPUs whose slowdown had lasted when it pushed, naming the phase
// they served if one; it resolves once no GPU has been slowed by the
// hardware for GPUClearAfter.
type GPUSlowdownRule struct {
	cfg   GPUConfig
	since map[int]time.Time // by GPU index: since when its hardware slowdown has held
	inc   lasting
	owner gpuOwners
}

// Name is RuleGPUSlowdown.
func (r *GPUSlowdownRule) Name() RuleName { return RuleGPUSlowdown }

// hwSlowed reports whether the hardware holds d's clocks down, and
// whether d was read well enough to say.
func hwSlowed(d gpu.Device) (on, known bool) {
	if d.Lost || !d.Has(gpu.FieldClockEvents) {
		return false, false
	}
	return d.ClockEventReasons.AnyHW(), true
}

// Observe checks every GPU the poll read.
func (r *GPUSlowdownRule) Observe(s Sample, now time.Time) []Alert {
	if !s.GPUsRead() {
		clear(r.since)
		r.inc.hold()
		return nil
	}
	if r.owner == nil {
		r.owner = gpuOwners{}
	}
	r.owner.update(s)
	var lasted []gpu.Device // slowed for SlowdownAfter
	earliest := time.Time{}
	slowed := false
	for _, d := range s.GPUs {
		on, known := hwSlowed(d)
		if !known || !on {
			delete(r.since, d.Index)
			continue
		}
		slowed = true
		if _, ok := r.since[d.Index]; !ok {
			r.since[d.Index] = now
		}
		if since := r.since[d.Index]; now.Sub(since) >= r.cfg.SlowdownAfter {
			lasted = append(lasted, d)
			if earliest.IsZero() || since.Before(earliest) {
				earliest = since
			}
		}
	}
	// The incident holds while any GPU is slowed, and is due once one
	// has been for SlowdownAfter: its start is that GPU's.
	on := slowed && (r.inc.ep.disarmed || len(lasted) > 0)
	if on && !r.inc.ep.disarmed {
		r.inc.since = earliest
	}
	fire, over, notify := r.inc.observe(on, earliest, now, 0, false)
	switch {
	case fire:
		if r.inc.facts.Devices == nil { // the first push, not a retry
			r.inc.facts, r.inc.phase = GPUFacts{Devices: lasted}, r.owner.phaseOf(lasted)
		}
		return []Alert{r.alert(Firing, s, now)}
	case over && notify:
		return []Alert{r.alert(Resolved, s, now)}
	}
	return nil
}

func (r *GPUSlowdownRule) alert(status Status, s Sample, now time.Time) Alert {
	return Alert{Rule: RuleGPUSlowdown, Status: status, Began: r.inc.began, At: now, Sample: s, Phase: r.inc.phase, GPU: r.inc.facts}
}

// Pushed learns the outcome of a push.
func (r *GPUSlowdownRule) Pushed(a Alert, delivered bool, now time.Time) {
	r.inc.pushed(a, delivered, now, r.cfg.Repeat)
}

// State is armed while no slowdown incident has pushed.
func (r *GPUSlowdownRule) State() RuleState {
	return RuleState{Name: RuleGPUSlowdown, Armed: !r.inc.ep.disarmed, Since: r.inc.ep.began, Undelivered: r.inc.ep.undelivered()}
}
