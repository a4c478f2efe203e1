package watchdog

import (
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// OpenIncident is an incident a rule has pushed (or tried to) and not yet
// ended, as plain data: the command keeps the open incidents across a
// restart (Config.OnOpen, Watchdog.Restore) so that the restarted watchdog
// goes on with the same incident. Restored, an incident still present
// keeps its Began, hence its notification, and reminds at LastSent plus
// the repeat, with no new first push; one gone by the first poll is
// resolved as ever. Without it the phone would get a second notification
// for the same swap, and the first would never be resolved.
type OpenIncident struct {
	Rule RuleName `json:"rule"`
	// Incident is the alert's Incident: the phase for a stall, the
	// filesystem and condition for disk space; "" for a rule with one
	// incident at a time.
	Incident string `json:"incident,omitempty"`
	// Started is, for a stall, when the stalled run of the phase started:
	// a phase started again is another run, whose stall is not this one.
	Started time.Time `json:"started,omitzero"`
	// OnStep is, for a stall, whether the step stood still while pings
	// came (else the heartbeat went silent).
	OnStep bool `json:"on_step,omitempty"`
	// Phase is, for a GPU rule, the phase its pushes named; GPU what its
	// first push said of the GPUs (their readings, without the read
	// errors), which its resolution says again.
	Phase string    `json:"phase,omitempty"`
	GPU   *GPUFacts `json:"gpu,omitempty"`
	// LastSeen is, for gpu-ecc, when the count last rose: the incident
	// ends after a quiet --watchdog.repeat.
	LastSeen time.Time `json:"last_seen,omitzero"`
	// Fault is, for the kernel-log rules (gpu, disk), the record the
	// incident's pushes word, and Repeats the repeats counted since its
	// last push, which the push at the window's end (LastSent plus the
	// repeat) tells.
	Fault   *KernelFault `json:"fault,omitempty"`
	Repeats int          `json:"repeats,omitempty"`
	// End is, for failed and done, the end of a push no phone took, and
	// Ends how many ends that push counts: it is tried again after a
	// restart, as its text and id were (LastSent is its poll). Without an
	// End, Began is how far the rule had read the phase server's ends:
	// an end after it, which the restarted phase server still holds, is
	// news to the restarted rule.
	End       *phaseapi.PhaseEnd `json:"end,omitempty"`
	Ends      int                `json:"ends,omitempty"`
	Began     time.Time          `json:"began"`
	LastSent  time.Time          `json:"last_sent"`
	Delivered bool               `json:"delivered"` // a push of it reached a phone
}

// equal compares two incidents, times by the instant.
func (o OpenIncident) equal(p OpenIncident) bool {
	return o.Rule == p.Rule && o.Incident == p.Incident && o.Started.Equal(p.Started) && o.OnStep == p.OnStep &&
		o.Phase == p.Phase && reflect.DeepEqual(o.GPU, p.GPU) && o.LastSeen.Equal(p.LastSeen) &&
		reflect.DeepEqual(o.Fault, p.Fault) && o.Repeats == p.Repeats && reflect.DeepEqual(o.End, p.End) && o.Ends == p.Ends &&
		o.Began.Equal(p.Began) && o.LastSent.Equal(p.LastSent) && o.Delivered == p.Delivered
}

// carrier is a rule whose open incidents outlive the process: swap,
// memory pressure, stalls, disk space, the GPU telemetry rules, the
// kernel-log rules, the loss rule's pushed runs, and the failed and done
// rules' pushes no phone took.
type carrier interface {
	// open lists the rule's open incidents.
	open() []OpenIncident
	// restore takes one back, before the first poll; false if it is not
	// the rule's.
	restore(OpenIncident) bool
}

// Restore gives the rules the open incidents of the process before, before
// the first poll; it returns how many a rule took (one of a rule no longer
// built, or that carries nothing, is dropped).
func (w *Watchdog) Restore(incidents []OpenIncident) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, o := range incidents {
		for _, r := range w.cfg.Rules {
			if c, ok := r.(carrier); ok && r.Name() == o.Rule && c.restore(o) {
				n++
				break
			}
		}
	}
	w.carried = w.openLocked()
	w.publish()
	return n
}

// openLocked lists every rule's open incidents, in the order of the rules.
func (w *Watchdog) openLocked() []OpenIncident {
	var out []OpenIncident
	for _, r := range w.cfg.Rules {
		if c, ok := r.(carrier); ok {
			out = append(out, c.open()...)
		}
	}
	return out
}

// reportOpenLocked hands the open incidents to Config.OnOpen when they
// changed since it last did.
func (w *Watchdog) reportOpenLocked() {
	if w.cfg.OnOpen == nil {
		return
	}
	open := w.openLocked()
	if slices.EqualFunc(open, w.carried, OpenIncident.equal) {
		return
	}
	w.carried = open
	w.cfg.OnOpen(slices.Clone(open))
}

// atMostOne is the open incidents of a rule with one incident at a time.
func atMostOne(o OpenIncident, open bool) []OpenIncident {
	if !open {
		return nil
	}
	return []OpenIncident{o}
}

// open is the episode as an OpenIncident of rule, if it is open.
func (e *episode) open(rule RuleName, incident string) (OpenIncident, bool) {
	if !e.disarmed {
		return OpenIncident{}, false
	}
	return OpenIncident{Rule: rule, Incident: incident, Began: e.began, LastSent: e.lastSent, Delivered: e.delivered}, true
}

// restore opens the episode as o left it. A push no phone took is tried
// again at the first poll, with the same Began.
func (e *episode) restore(o OpenIncident) {
	e.disarmed, e.began, e.lastSent, e.delivered = true, o.Began, o.LastSent, o.Delivered
	e.retryAt, e.backoff = time.Time{}, 0
	if !o.Delivered {
		e.retryAt = o.LastSent
	}
}

func (r *SwapRule) open() []OpenIncident { return atMostOne(r.ep.open(RuleSwap, "")) }

func (r *SwapRule) restore(o OpenIncident) bool {
	r.ep.restore(o)
	return true
}

func (r *PressureRule) open() []OpenIncident { return atMostOne(r.ep.open(RulePressure, "")) }

func (r *PressureRule) restore(o OpenIncident) bool {
	r.ep.restore(o)
	return true
}

func (r *StallRule) open() []OpenIncident {
	var out []OpenIncident
	for key, st := range r.stalls {
		if o, ok := st.ep.open(RuleStalled, key.name); ok {
			o.Started, o.OnStep, o.Began = time.Unix(0, key.started), st.onStep, st.began
			out = append(out, o)
		}
	}
	sortOpen(out)
	return out
}

// restore takes back a stall: it ends, silently, at the first poll if the
// phase pinged (or moved) since it began, or is gone or ended.
func (r *StallRule) restore(o OpenIncident) bool {
	if o.Incident == "" {
		return false
	}
	if r.stalls == nil {
		r.stalls = map[phaseRun]*stall{}
	}
	st := &stall{ep: episode{repeat: r.repeat, retry: r.retry}, began: o.Began, onStep: o.OnStep}
	st.ep.restore(o)
	r.stalls[phaseRun{o.Incident, o.Started.UnixNano()}] = st
	return true
}

func (r *DiskRule) open() []OpenIncident {
	var out []OpenIncident
	for key, ep := range r.episodes {
		if o, ok := ep.open(RuleDiskSpace, diskIncident(key.path, key.kind)); ok {
			out = append(out, o)
		}
	}
	sortOpen(out)
	return out
}

// restore takes back one condition of one filesystem. It stays as it is
// while this process cannot yet tell whether it holds (diskKnown, a path
// unreadable for less than DiskUnreadableAfter), is resolved once it
// clearly does not, and ends silently if its path is no longer watched
// (an unreadable path) or waits for its disk, as an incident does.
func (r *DiskRule) restore(o OpenIncident) bool {
	path, kind, ok := strings.Cut(o.Incident, "\x00")
	if !ok || !slices.Contains(append(diskKinds[:len(diskKinds):len(diskKinds)], DiskUnreadable), DiskKind(kind)) {
		return false
	}
	key := diskKey{path, DiskKind(kind)}
	ep := &episode{retry: r.cfg.Retry}
	ep.restore(o)
	r.episodes[key] = ep
	if r.held == nil {
		r.held = map[diskKey]bool{}
	}
	r.held[key] = true
	return true
}

// sortOpen orders incidents of maps, whose order is random, so that the
// same incidents compare equal.
func sortOpen(out []OpenIncident) {
	slices.SortFunc(out, func(a, b OpenIncident) int {
		if c := a.Began.Compare(b.Began); c != 0 {
			return c
		}
		if c := strings.Compare(a.Incident, b.Incident); c != 0 {
			return c
		}
		return a.Started.Compare(b.Started)
	})
}

// open is the GPU incident as an OpenIncident of rule, if it is open.
func (l *lasting) open(rule RuleName, incident string) (OpenIncident, bool) {
	o, ok := l.ep.open(rule, incident)
	if !ok {
		return o, false
	}
	facts := l.facts
	facts.Devices = slices.Clone(facts.Devices)
	for i := range facts.Devices {
		facts.Devices[i].Err = nil // an error does not round-trip JSON; no push says it
	}
	o.Began, o.Phase, o.GPU = l.began, l.phase, &facts
	return o, true
}

// restore opens the incident as o left it. While the GPUs cannot be read
// (NVML stuck, telemetry off) it stays as it is, as an incident does.
func (l *lasting) restore(o OpenIncident) {
	l.ep.restore(o)
	l.began, l.phase = o.Began, o.Phase
	if o.GPU != nil {
		l.facts = *o.GPU
	}
}

func (r *GPUDeviceRule) open() []OpenIncident {
	var out []OpenIncident
	for key, l := range r.incidents {
		if o, ok := l.open(r.name, key); ok {
			out = append(out, o)
		}
	}
	sortOpen(out)
	return out
}

// restore takes back a GPU's incident, by its bus id, or NVML's own
// (GPUStuckIncident): that one stays while a pass of the restarted
// process has been stuck for less than GPUStuckAfter, and ends at the
// first poll that reads the GPUs.
func (r *GPUDeviceRule) restore(o OpenIncident) bool {
	if o.Incident == "" {
		return false
	}
	l := newLasting(r.cfg.Retry)
	l.restore(o)
	r.incidents[o.Incident] = &l
	return true
}

func (r *GPUECCRule) open() []OpenIncident {
	var out []OpenIncident
	for key, inc := range r.incidents {
		if o, ok := inc.l.open(RuleGPUECC, key); ok {
			o.LastSeen = inc.lastRise
			out = append(out, o)
		}
	}
	sortOpen(out)
	return out
}

// restore takes back a GPU's ECC incident: the restarted process reads
// the count afresh (a first reading is no rise), and the incident ends a
// quiet --watchdog.repeat after the last rise the process before saw.
func (r *GPUECCRule) restore(o OpenIncident) bool {
	if o.Incident == "" || o.LastSeen.IsZero() {
		return false
	}
	inc := &eccIncident{l: newLasting(r.cfg.Retry), lastRise: o.LastSeen}
	inc.l.restore(o)
	r.incidents[o.Incident] = inc
	return true
}

func (r *GPUPhaseRule) open() []OpenIncident {
	var out []OpenIncident
	for key, l := range r.incidents {
		if o, ok := l.open(r.name, key.name); ok {
			o.Started = time.Unix(0, key.started)
			out = append(out, o)
		}
	}
	sortOpen(out)
	return out
}

// restore takes back the incident of a run of a phase: it ends at the
// first poll that reads the GPUs if that run is no longer active.
func (r *GPUPhaseRule) restore(o OpenIncident) bool {
	if o.Incident == "" || o.Started.IsZero() {
		return false
	}
	l := newLasting(r.cfg.Retry)
	l.restore(o)
	l.phase = o.Incident
	r.incidents[phaseRun{o.Incident, o.Started.UnixNano()}] = &l
	return true
}

func (r *GPUSlowdownRule) open() []OpenIncident { return atMostOne(r.inc.open(RuleGPUSlowdown, "")) }

// restore takes back the slowdown incident: it lasts while any GPU is
// slowed by the hardware, and ends once none has been for GPUClearAfter.
func (r *GPUSlowdownRule) restore(o OpenIncident) bool {
	r.inc.restore(o)
	return true
}

// open lists the faults being counted or retried. A push on its way
// counts as not delivered: a restart before its outcome tries it again.
func (r *KernelRule) open() []OpenIncident {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []OpenIncident
	for key, inc := range r.incidents {
		f := inc.fault
		out = append(out, OpenIncident{Rule: r.name, Incident: key, Fault: &f, Repeats: inc.held,
			Began: inc.began, LastSent: inc.window, Delivered: !inc.pending && !inc.inFlight})
	}
	sortOpen(out)
	return out
}

// restore takes back a fault being counted: a repeat of it within its
// window is counted into it ("again N times" at the window's end), not a
// new first push; one whose window ended while nothing watched is over
// at the first poll, with the count of the repeats it held if any. Kernel
// faults are never resolved, so an incident over has nothing to push.
func (r *KernelRule) restore(o OpenIncident) bool {
	if o.Fault == nil || o.Fault.key() != o.Incident || !r.takes(*o.Fault) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.incidents) >= maxIncidents {
		r.evictOldest()
	}
	r.incidents[o.Incident] = &faultIncident{fault: *o.Fault, began: o.Began, window: o.LastSent, held: max(o.Repeats, 0), pending: !o.Delivered}
	return true
}

// open lists the runs whose non-finite loss a phone has been told of (a
// push still pending is not: a restart pushes it again), so that a restart
// does not tell it again while the run is in the table.
func (r *LossRule) open() []OpenIncident {
	var out []OpenIncident
	for key, began := range r.seen {
		if began.IsZero() || slices.ContainsFunc(r.outbox.pending, func(a Alert) bool { return a.Phase == key.name && a.Began.Equal(began) }) {
			continue
		}
		out = append(out, OpenIncident{Rule: RuleLoss, Incident: key.name, Started: time.Unix(0, key.started), Began: began, LastSent: began, Delivered: true})
	}
	sortOpen(out)
	return out
}

// restore takes back a run already pushed: it is not pushed again, and is
// forgotten once it leaves the table.
func (r *LossRule) restore(o OpenIncident) bool {
	if o.Incident == "" || o.Started.IsZero() || !o.Delivered {
		return false
	}
	if r.seen == nil {
		r.seen = map[phaseRun]time.Time{}
	}
	r.seen[phaseRun{o.Incident, o.Started.UnixNano()}] = o.Began
	return true
}
