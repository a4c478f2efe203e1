package watchdog

import (
	"time"

	"github.com/lavender-ml/lavender/gpu"
)

// GPUECCRule pushes when a GPU's volatile uncorrected ECC count rises
// between two polls: memory returned data the GPU could not correct, and
// the process that read it has likely failed or will. The first rise
// pushes at once; rises that follow within the incident are counted into
// it without a push of their own; the incident ends, with its resolution,
// once the count has not risen for Repeat. The count a GPU has when it is
// first read is where it starts from, not news; a count that falls (the
// driver reloaded) starts over from there.
type GPUECCRule struct {
	cfg       GPUConfig
	last      map[int]uint64 // the count at the previous poll, by GPU index
	incidents map[string]*eccIncident
	owners    gpuOwners
}

type eccIncident struct {
	l        lasting
	lastRise time.Time
}

// Name is RuleGPUECC.
func (r *GPUECCRule) Name() RuleName { return RuleGPUECC }

// Observe compares each GPU's count with the previous poll's.
func (r *GPUECCRule) Observe(s Sample, now time.Time) []Alert {
	if !s.GPUsRead() {
		return nil
	}
	if r.last == nil {
		r.last, r.owners = map[int]uint64{}, gpuOwners{}
	}
	r.owners.update(s)
	var out []Alert
	for _, d := range s.GPUs {
		if d.Lost || !d.Has(gpu.FieldECC) {
			continue
		}
		prev, seen := r.last[d.Index]
		r.last[d.Index] = d.ECCVolatileUncorrected
		key := gpuIncident(d)
		inc := r.incidents[key]
		if seen && d.ECCVolatileUncorrected > prev {
			rise := d.ECCVolatileUncorrected - prev
			if inc == nil {
				inc = &eccIncident{l: newLasting(r.cfg.Retry)}
				r.incidents[key] = inc
			}
			inc.lastRise = now
			if !inc.l.ep.disarmed {
				inc.l.observe(true, time.Time{}, now, 0, false)
				inc.l.facts = GPUFacts{Devices: []gpu.Device{d}, NewECC: rise}
				inc.l.phase = r.owners.phaseOf(inc.l.facts.Devices)
				out = append(out, r.alert(inc, Firing, key, s, now))
				continue
			}
			// Told already (or being retried): the retry and the
			// resolution carry the count as it stands.
			inc.l.facts.NewECC += rise
			inc.l.facts.Devices = []gpu.Device{d}
		}
		switch {
		case inc == nil:
		case inc.l.ep.due(now):
			inc.l.ep.fire(now) // a retry of the push no target accepted
			out = append(out, r.alert(inc, Firing, key, s, now))
		case inc.l.ep.retryAt.IsZero() && now.Sub(inc.lastRise) >= r.cfg.Repeat:
			// Quiet for a while, and the phone has the news (or no push
			// is waiting for a target): the incident is over.
			if _, notify := inc.l.end(); notify {
				out = append(out, r.alert(inc, Resolved, key, s, now))
			}
			delete(r.incidents, key)
		}
	}
	return out
}

func (r *GPUECCRule) alert(inc *eccIncident, status Status, key string, s Sample, now time.Time) Alert {
	return Alert{Rule: RuleGPUECC, Status: status, Incident: key, Began: inc.l.began, At: now, Sample: s, Phase: inc.l.phase, GPU: inc.l.facts}
}

// Pushed learns the outcome of a push for one GPU.
func (r *GPUECCRule) Pushed(a Alert, delivered bool, now time.Time) {
	if inc := r.incidents[a.Incident]; inc != nil {
		inc.l.pushed(a, delivered, now, r.cfg.Repeat)
	}
}

// State is armed while no GPU's ECC incident has pushed.
func (r *GPUECCRule) State() RuleState {
	st := RuleState{Name: RuleGPUECC, Armed: true}
	for _, inc := range r.incidents {
		if inc.l.ep.disarmed && (st.Armed || inc.l.ep.began.Before(st.Since)) {
			st.Armed, st.Since = false, inc.l.ep.began
		}
		st.Undelivered = st.Undelivered || inc.l.ep.undelivered()
	}
	return st
}
