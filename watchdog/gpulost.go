package watchdog

import (
	"errors"
	"time"

	"github.com/lavender-ml/lavender/gpu"
)

// GPUDeviceRule pushes a condition of one GPU that needs no time to be
// believed, one incident per GPU: RuleGPULost, a GPU NVML answers
// GPU_IS_LOST for (fallen off the bus: the run on it is over, the host
// needs a reboot), and RuleGPURemap (gpuremap.go). It pushes at the first
// poll that reads the condition, naming the phase the GPU served, and
// resolves at the first poll that reads the GPU without it. A poll that
// does not read the GPU changes nothing.
type GPUDeviceRule struct {
	name      RuleName
	cfg       GPUConfig
	incidents map[string]*lasting // by gpuIncident
	owners    gpuOwners
}

// Name is RuleGPULost or RuleGPURemap.
func (r *GPUDeviceRule) Name() RuleName { return r.name }

// holds reports whether the rule's condition holds on d, and whether d
// was read well enough to say.
func (r *GPUDeviceRule) holds(d gpu.Device) (on, known bool) {
	if r.name == RuleGPULost {
		return d.Lost, true
	}
	return remapNeeded(d)
}

// GPUStuckIncident is gpu-lost's incident for NVML itself: a pass stuck
// in an NVML call (gpu.ErrStuck) for GPUStuckAfter. While NVML is stuck
// no GPU is read, so no GPU's own incident starts or ends (a stuck pass
// is no proof that a GPU is lost, nor that a lost one came back); this
// one says that NVML stopped answering, and ends when a pass returns.
const GPUStuckIncident = "nvml"

// Observe checks every GPU the poll read, and NVML itself.
func (r *GPUDeviceRule) Observe(s Sample, now time.Time) []Alert {
	var out []Alert
	if r.name == RuleGPULost {
		out = r.observeStuck(s, now)
	}
	if !s.GPUsRead() {
		return out
	}
	if r.owners == nil {
		r.owners = gpuOwners{}
	}
	r.owners.update(s)
	for _, d := range s.GPUs {
		on, known := r.holds(d)
		if !known {
			continue
		}
		key := gpuIncident(d)
		l := lastingFor(r.incidents, key, on, r.cfg.Retry)
		if l == nil {
			continue
		}
		fire, over, notify := l.observe(on, time.Time{}, now, 0, !on)
		switch {
		case fire:
			if l.facts.Devices == nil { // the first push, not a retry
				l.facts, l.phase = GPUFacts{Devices: []gpu.Device{d}}, r.owners.phaseOf([]gpu.Device{d})
			}
			out = append(out, r.alert(l, Firing, key, s, now))
		case over:
			if notify {
				out = append(out, r.alert(l, Resolved, key, s, now))
			}
			delete(r.incidents, key)
		}
	}
	return out
}

// observeStuck is the GPUStuckIncident: on once a pass has been stuck
// for GPUStuckAfter, over at the first poll that reads the GPUs. A stall
// shorter than that, or a poll that reads nothing (telemetry off, the
// Reader closed), changes nothing.
func (r *GPUDeviceRule) observeStuck(s Sample, now time.Time) []Alert {
	var stuck *gpu.StuckError
	switch {
	case errors.As(s.GPUErr, &stuck):
		if stuck.For < GPUStuckAfter {
			return nil
		}
	case !s.GPUsRead():
		return nil
	}
	on := stuck != nil
	key := GPUStuckIncident
	l := lastingFor(r.incidents, key, on, r.cfg.Retry)
	if l == nil {
		return nil
	}
	fire, over, notify := l.observe(on, time.Time{}, now, 0, !on)
	switch {
	case fire:
		if l.facts.Stuck == 0 { // the first push, not a retry
			l.facts, l.phase = GPUFacts{Stuck: stuck.For}, ""
		}
		return []Alert{r.alert(l, Firing, key, s, now)}
	case over:
		delete(r.incidents, key)
		if notify {
			return []Alert{r.alert(l, Resolved, key, s, now)}
		}
	}
	return nil
}

func (r *GPUDeviceRule) alert(l *lasting, status Status, key string, s Sample, now time.Time) Alert {
	return Alert{Rule: r.name, Status: status, Incident: key, Began: l.began, At: now, Sample: s, Phase: l.phase, GPU: l.facts}
}

// Pushed learns the outcome of a push for one GPU.
func (r *GPUDeviceRule) Pushed(a Alert, delivered bool, now time.Time) {
	if l := r.incidents[a.Incident]; l != nil {
		l.pushed(a, delivered, now, r.cfg.Repeat)
	}
}

// State is armed while no GPU's incident has pushed.
func (r *GPUDeviceRule) State() RuleState { return lastingState(r.name, r.incidents) }
