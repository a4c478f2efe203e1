package watchdog

import (
	"time"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/phaseapi"
)

// GPUPhaseRule pushes a condition of an active phase's GPUs (its
// Sample.PhaseGPUs) that has lasted, with no progress from the phase,
// for the rule's time: RuleGPUHang, every GPU busy at little power (a
// rank stuck in a collective: NCCL's kernels spin, so NVML counts them
// busy, but compute nothing, so they draw about idle power), or
// RuleGPUIdle (gpuidle.go), every GPU idle. One incident per run of a
// phase.
//
// Progress is the phase's step, its evaluation's step and work between
// steps the client saw moving (busy: a save, compute_metrics), as for
// the stalled rule: the incident counts from the later of the condition's
// start and the last progress. A phase that reports no progress at all
// (a wrapped command) is judged on its GPUs alone, and the alert says so
// (GPUFacts.NoSteps).
//
// The incident resolves once the condition has been gone for
// GPUClearAfter, at once when the phase makes progress or ends. A poll
// that did not read the GPUs neither starts nor ends one: a streak not
// yet pushed starts over.
type GPUPhaseRule struct {
	name      RuleName
	after     time.Duration
	cfg       GPUConfig
	incidents map[phaseRun]*lasting
}

// Name is RuleGPUHang or RuleGPUIdle.
func (r *GPUPhaseRule) Name() RuleName { return r.name }

// holds is the rule's condition on one GPU; false for a GPU not read
// well enough to say.
func (r *GPUPhaseRule) holds(d gpu.Device) bool {
	if r.name == RuleGPUHang {
		return hangLooking(d)
	}
	return idleLooking(d)
}

// hangLooking: busy at GPUHangUtil or more while drawing at most
// GPUHangPowerRatio of the enforced limit.
func hangLooking(d gpu.Device) bool {
	if d.Lost || !d.Has(gpu.FieldUtilization) || !d.Has(gpu.FieldPower) || !d.Has(gpu.FieldPowerLimit) || !(d.PowerLimitW > 0) {
		return false
	}
	return d.SMUtil >= GPUHangUtil && d.PowerW <= GPUHangPowerRatio*d.PowerLimitW
}

// phaseDevices are the devices of the sample the phase runs on; ok is
// false when it runs on none, or one of them was not in the poll.
func phaseDevices(s Sample, name string) ([]gpu.Device, bool) {
	idx := s.PhaseGPUs[name]
	if len(idx) == 0 {
		return nil, false
	}
	out := make([]gpu.Device, 0, len(idx))
	for _, i := range idx {
		found := false
		for _, d := range s.GPUs {
			if d.Index == i {
				out, found = append(out, d), true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return out, true
}

// progressAt is when p last made progress, and whether it reports any:
// its step (or its start, if it told a total before its first step), its
// evaluation's step, work between steps.
func progressAt(p phaseapi.Phase) (time.Time, bool) {
	moved, steps := lastMoved(p)
	if steps {
		return moved, true
	}
	// No step yet, and no total: an evaluation or busy work still says
	// the phase moves.
	reports := false
	if p.EvalStep != nil {
		moved, reports = p.EvalProgressAt, true
	}
	if p.Busy != "" {
		reports = true
		if p.BusyAt.After(moved) {
			moved = p.BusyAt
		}
	}
	return moved, reports
}

// Observe checks every active phase on GPUs.
func (r *GPUPhaseRule) Observe(s Sample, now time.Time) []Alert {
	if !s.GPUsRead() {
		for _, l := range r.incidents {
			l.hold()
		}
		return nil
	}
	var out []Alert
	live := map[phaseRun]bool{}
	for _, p := range s.Phases {
		if p.Status != phaseapi.StatusActive {
			continue
		}
		key := phaseRun{p.Name, p.Started.UnixNano()}
		live[key] = true
		devs, ok := phaseDevices(s, p.Name)
		on := ok
		for _, d := range devs {
			on = on && r.holds(d)
		}
		moved, reports := progressAt(p)
		l := lastingFor(r.incidents, key, on, r.cfg.Retry)
		if l == nil {
			continue
		}
		progressed := reports && moved.After(l.began)
		fire, over, notify := l.observe(on, moved, now, r.after, progressed)
		switch {
		case fire:
			if l.facts.Devices == nil { // the first push, not a retry
				l.facts, l.phase = GPUFacts{Devices: devs, NoSteps: !reports}, p.Name
			}
			out = append(out, r.alert(l, Firing, s, now))
		case over:
			if notify {
				out = append(out, r.alert(l, Resolved, s, now))
			}
			delete(r.incidents, key)
		case !l.ep.disarmed && !on:
			delete(r.incidents, key)
		}
	}
	// A phase that ended, or left the table, ends its incident.
	for key, l := range r.incidents {
		if live[key] {
			continue
		}
		if _, notify := l.end(); notify {
			out = append(out, r.alert(l, Resolved, s, now))
		}
		delete(r.incidents, key)
	}
	return out
}

func (r *GPUPhaseRule) alert(l *lasting, status Status, s Sample, now time.Time) Alert {
	return Alert{Rule: r.name, Status: status, Incident: l.phase, Began: l.began, At: now, Sample: s, Phase: l.phase, GPU: l.facts}
}

// Pushed learns the outcome of a push for one phase.
func (r *GPUPhaseRule) Pushed(a Alert, delivered bool, now time.Time) {
	for key, l := range r.incidents {
		if key.name == a.Phase {
			l.pushed(a, delivered, now, r.cfg.Repeat)
		}
	}
}

// State is armed while no phase's incident has pushed.
func (r *GPUPhaseRule) State() RuleState { return lastingState(r.name, r.incidents) }
