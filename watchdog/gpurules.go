package watchdog

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/phaseapi"
)

// The GPU telemetry rules' defaults and thresholds.
const (
	// DefaultGPUHangAfter is --watchdog.gpu-hang-after: how long a
	// phase's GPUs must look hung (busy, at little power, no new step)
	// before the phone hears of it. A collective that waits on a slow
	// peer for a minute is no hang; NCCL's own watchdog gives up after
	// ten.
	DefaultGPUHangAfter = 5 * time.Minute
	// DefaultGPUIdleAfter is --watchdog.gpu-idle-after: how long a
	// phase's GPUs may sit idle with no progress. A checkpoint save or a
	// slow evaluation that the client reports never counts; one it does
	// not report rarely lasts this long.
	DefaultGPUIdleAfter = 10 * time.Minute
	// DefaultGPUSlowdownAfter is --watchdog.gpu-slowdown-after: how long
	// a hardware slowdown must last. The power brake and thermal
	// slowdowns come in short bursts on a healthy box; minutes of one
	// cost a run real time.
	DefaultGPUSlowdownAfter = 3 * time.Minute

	// GPUHangUtil is the SM utilization, in percent, at or above which a
	// GPU counts as busy for the hang rule. NVML counts a kernel that
	// spins waiting on a peer as busy, so a rank stuck in a collective
	// reads 100%.
	GPUHangUtil = 90
	// GPUHangPowerRatio is the share of the enforced power limit at or
	// under which a busy GPU draws too little to be computing: a rank
	// spinning in a collective draws about its idle power (some 70 W of
	// an A100's 400 W, under a fifth), while real work at that
	// utilization draws well over half the limit.
	GPUHangPowerRatio = 0.25
	// GPUIdleUtil is the SM utilization, in percent, at or under which a
	// GPU counts as idle.
	GPUIdleUtil = 5
	// GPUClearAfter is how long a condition must be gone before its
	// incident ends, so a reading that dips for one poll neither ends an
	// incident nor, by ending it, lets it push again.
	GPUClearAfter = time.Minute
	// GPUStuckAfter is how long an NVML pass must have been stuck before
	// gpu-lost pushes that NVML stopped answering. A pass takes
	// milliseconds; the driver's own timeouts on a GPU in a bad state
	// run to tens of seconds and may recover, and while NVML is stuck no
	// GPU rule can read anything, so a minute of it is an incident.
	GPUStuckAfter = time.Minute
)

// GPUConfig tunes the GPU telemetry rules. Each "After" of 0 turns its
// rule off; the lost, remap and ECC rules have no threshold and are on
// whenever the GPU rules are.
type GPUConfig struct {
	HangAfter     time.Duration // --watchdog.gpu-hang-after
	IdleAfter     time.Duration // --watchdog.gpu-idle-after
	SlowdownAfter time.Duration // --watchdog.gpu-slowdown-after
	// Repeat caps the retry backoff and is the quiet time that ends an
	// ECC incident (DefaultRepeat when 0): no reminders, a GPU fault
	// stays until someone acts and the first push says so.
	Repeat time.Duration // --watchdog.repeat
	Retry  time.Duration // --watchdog.interval: first retry after a push no target accepted
}

// DefaultGPUConfig is the GPU rules' defaults.
var DefaultGPUConfig = GPUConfig{
	HangAfter:     DefaultGPUHangAfter,
	IdleAfter:     DefaultGPUIdleAfter,
	SlowdownAfter: DefaultGPUSlowdownAfter,
}

// NewGPURules checks cfg and returns the GPU telemetry rules, in the
// order lost, ecc, remap, hang, idle, slowdown. They read Sample.GPUs
// and Sample.PhaseGPUs, and are silent on a host without GPU telemetry.
func NewGPURules(cfg GPUConfig) ([]Rule, error) {
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"--watchdog.gpu-hang-after", cfg.HangAfter}, {"--watchdog.gpu-idle-after", cfg.IdleAfter}, {"--watchdog.gpu-slowdown-after", cfg.SlowdownAfter}} {
		if d.value < 0 || (d.value > 0 && d.value < time.Minute) {
			// Shorter is the length of a normal collective, save or
			// power-brake burst: a push would be noise.
			return nil, fmt.Errorf("%s must be at least 1m (or 0 to turn it off), not %s", d.flag, d.value)
		}
	}
	repeat, retry, err := cadence(cfg.Repeat, cfg.Retry)
	if err != nil {
		return nil, err
	}
	if repeat == 0 {
		repeat = DefaultRepeat
	}
	cfg.Repeat, cfg.Retry = repeat, retry
	rules := []Rule{
		&GPUDeviceRule{name: RuleGPULost, cfg: cfg, incidents: map[string]*lasting{}},
		&GPUECCRule{cfg: cfg, incidents: map[string]*eccIncident{}},
		&GPUDeviceRule{name: RuleGPURemap, cfg: cfg, incidents: map[string]*lasting{}},
	}
	if cfg.HangAfter > 0 {
		rules = append(rules, &GPUPhaseRule{name: RuleGPUHang, after: cfg.HangAfter, cfg: cfg, incidents: map[phaseRun]*lasting{}})
	}
	if cfg.IdleAfter > 0 {
		rules = append(rules, &GPUPhaseRule{name: RuleGPUIdle, after: cfg.IdleAfter, cfg: cfg, incidents: map[phaseRun]*lasting{}})
	}
	if cfg.SlowdownAfter > 0 {
		rules = append(rules, &GPUSlowdownRule{cfg: cfg, since: map[int]time.Time{}, inc: newLasting(cfg.Retry)})
	}
	return rules, nil
}

// GPUFacts is what a GPU rule's alert is about.
type GPUFacts struct {
	// Devices are the GPUs of the incident as the poll that raised it
	// read them (its resolution carries the same), by index.
	Devices []gpu.Device
	// NewECC (gpu-ecc) is how many uncorrected ECC errors the incident
	// has seen appear.
	NewECC uint64
	// NoSteps (gpu-hang, gpu-idle): the phase reports no progress, so
	// the GPUs' readings alone raised the alert.
	NoSteps bool
	// Stuck (gpu-lost, incident GPUStuckIncident): how long NVML had
	// not answered when the incident began; no Devices then.
	Stuck time.Duration
}

// Indexes are the facts' GPU indexes, ascending.
func (f GPUFacts) Indexes() []int {
	out := make([]int, len(f.Devices))
	for i, d := range f.Devices {
		out[i] = d.Index
	}
	return out
}

// lasting is one incident of a condition that must hold for a while
// before it pushes, and must be gone for GPUClearAfter (or be ended
// outright) before it resolves. No reminders: Pushed caps the backoff.
// Make one with newLasting: an episode without its retry would retry a
// push no target accepted at every poll, without a backoff.
type lasting struct {
	ep       episode
	since    time.Time // when the condition began to hold; zero while it does not
	offSince time.Time // in an incident: when the condition stopped holding
	facts    GPUFacts  // what the incident's first push said
	phase    string
	began    time.Time // when the incident last pushed began: its resolution's Began
}

// newLasting is an incident whose pushes that reach no phone are retried
// after retry (--watchdog.interval), doubling up to the repeat that
// pushed caps them at.
func newLasting(retry time.Duration) lasting {
	return lasting{ep: episode{retry: retry}}
}

// observe reads one poll: on, whether the condition holds; start, the
// earliest time the incident may count from besides the condition's own
// start (the phase's last progress); after, how long it must last; end,
// whether the incident is over whatever the condition (progress came,
// the reading is decisive). fire: push the incident now; over: it ended,
// with notify when the phone had heard of it.
func (l *lasting) observe(on bool, start, now time.Time, after time.Duration, end bool) (fire bool, over, notify bool) {
	if l.ep.disarmed && end {
		_, notify = l.end()
		return false, true, notify
	}
	if !on {
		l.since = time.Time{}
		if !l.ep.disarmed {
			return false, false, false
		}
		if l.offSince.IsZero() {
			l.offSince = now
		}
		if now.Sub(l.offSince) >= GPUClearAfter {
			_, notify = l.end()
			return false, true, notify
		}
		return false, false, false
	}
	l.offSince = time.Time{}
	if l.since.IsZero() {
		l.since = now
	}
	began := l.since
	if start.After(began) {
		began = start
	}
	switch {
	case l.ep.disarmed:
		if l.ep.due(now) { // a retry
			l.ep.fire(now)
			return true, false, false
		}
	case now.Sub(began) >= after:
		l.ep.fire(now)
		l.ep.began, l.began = began, began
		l.facts, l.phase = GPUFacts{}, "" // the caller says what this incident is
		return true, false, false
	}
	return false, false, false
}

// hold is a poll that saw nothing of the condition: an incident not yet
// pushed starts over, one pushed stays as it is.
func (l *lasting) hold() {
	l.since, l.offSince = time.Time{}, time.Time{}
}

func (l *lasting) end() (time.Time, bool) {
	began, notify := l.ep.rearm()
	l.since, l.offSince = time.Time{}, time.Time{}
	return began, notify
}

// pushed records a push's outcome, capping the backoff at repeat; a
// resolution is not retried.
func (l *lasting) pushed(a Alert, delivered bool, now time.Time, repeat time.Duration) {
	if a.Status == Resolved || !l.ep.began.Equal(a.Began) {
		return
	}
	l.ep.pushed(delivered, now)
	if !delivered && l.ep.backoff > repeat {
		l.ep.backoff, l.ep.retryAt = repeat, now.Add(repeat)
	}
}

// lastingFor is key's incident in incidents, made (with the rule's retry)
// when the condition is on; nil when there is none and nothing is wrong.
func lastingFor[K comparable](incidents map[K]*lasting, key K, on bool, retry time.Duration) *lasting {
	l := incidents[key]
	if l == nil && on {
		fresh := newLasting(retry)
		l = &fresh
		incidents[key] = l
	}
	return l
}

// lastingState is armed while no incident has pushed; Since is when the
// earliest that has began.
func lastingState[K comparable](name RuleName, incidents map[K]*lasting) RuleState {
	st := RuleState{Name: name, Armed: true}
	for _, l := range incidents {
		if l.ep.disarmed && (st.Armed || l.ep.began.Before(st.Since)) {
			st.Armed, st.Since = false, l.ep.began
		}
		st.Undelivered = st.Undelivered || l.ep.undelivered()
	}
	return st
}

// gpuOwners remembers which phase each GPU last served, so that a GPU
// that is lost (and lists no process any more) is still named with its
// phase. An entry lasts while its phase is active.
type gpuOwners map[int]string

// update reads a poll that read the GPUs.
func (o gpuOwners) update(s Sample) {
	now := gpuPhase(s)
	for _, d := range s.GPUs {
		if name, ok := now[d.Index]; ok {
			o[d.Index] = name
		} else if !d.Lost && d.Has(gpu.FieldProcesses) {
			delete(o, d.Index) // it answers and serves no phase
		}
	}
	for i, name := range o {
		if !slices.ContainsFunc(s.Phases, func(p phaseapi.Phase) bool { return p.Name == name && p.Active() }) {
			delete(o, i)
		}
	}
}

// phaseOf is the phase of the GPUs: the one phase they served, "" for
// none or for several.
func (o gpuOwners) phaseOf(devices []gpu.Device) string {
	phase := ""
	for _, d := range devices {
		name, ok := o[d.Index]
		switch {
		case !ok:
		case phase == "":
			phase = name
		case phase != name:
			return ""
		}
	}
	return phase
}

// gpuIncident names a GPU's incident: its bus id, which a restart of
// lavender does not renumber, else its index.
func gpuIncident(d gpu.Device) string {
	if d.BusID != "" {
		return d.BusID
	}
	return strconv.Itoa(d.Index)
}
