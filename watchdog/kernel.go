package watchdog

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/lavender-ml/lavender/internal/backoff"
	"github.com/lavender-ml/lavender/kmsg"
)

// KernelFault is one fault of the kernel log as the watchdog words it: the
// record's facts and the phase it hit.
type KernelFault struct {
	kmsg.Fault
	// Phase is the phase whose process, or a descendant of it, the
	// record names (ByPID), or for a record that names no process the
	// phase that was running then; "" for none.
	Phase string
	ByPID bool
}

// key is what makes repeats of a fault one incident: the GPU and Xid, the
// device and kind. A GPU fallen off the bus is one incident whether the
// driver said it with Xid 79 or without.
func (f KernelFault) key() string {
	switch {
	case f.FallenOff():
		return "bus\x00" + f.GPU
	case f.Kind == kmsg.Xid:
		return "xid\x00" + f.GPU + "\x00" + strconv.Itoa(f.Xid)
	}
	return "disk\x00" + f.Device + "\x00" + string(f.Storage)
}

// maxIncidents bounds the incidents a kernel rule keeps: a log naming
// endless devices or GPUs evicts the oldest.
const maxIncidents = 256

// EventRule is a rule fed by events as they happen rather than by the
// poll: the watchdog hands it each fault at once and pushes what it
// returns without waiting for the next poll. Its Observe still runs every
// poll, for what is due later (the count of repeats at the end of a
// window, retries). Unlike a polled rule, it is called from two goroutines
// and guards itself.
type EventRule interface {
	Rule
	// Fault reads one fault seen at now and returns what to push now.
	Fault(f KernelFault, now time.Time) []Alert
}

// KernelConfig tunes a kernel fault rule.
type KernelConfig struct {
	// Repeat is the window in which repeats of one fault (one GPU and
	// Xid, one device and kind) are one push that counts them, pushed
	// when the window ends; 0: DefaultRepeat, since a storm of records
	// must never become a storm of pushes.
	Repeat time.Duration // --watchdog.repeat
	Retry  time.Duration // --watchdog.interval: first retry after a push no target accepted
}

// KernelRule pushes faults of the kernel log at once: the GPU faults
// (RuleGPU) or the storage faults (RuleDisk). The first record
// of a fault pushes; repeats within the window are counted and pushed as
// one when it ends ("again 41 times in 10m"), then a new window begins
// while they go on. If no target accepts a push, it is retried with a
// backoff, with the repeats that came meanwhile.
type KernelRule struct {
	name          RuleName
	repeat, retry time.Duration

	mu        sync.Mutex
	incidents map[string]*faultIncident
}

type faultIncident struct {
	fault    KernelFault // the record the incident's pushes word
	began    time.Time   // when the first record came
	window   time.Time   // when the current window began (its push)
	held     int         // repeats since the window's push
	pending  bool        // the last push reached no target: retry at retryAt
	retryAt  time.Time
	backoff  time.Duration
	inFlight bool // a push is on its way
}

// NewKernelRules returns the GPU and the disk rule.
func NewKernelRules(cfg KernelConfig) ([]Rule, error) {
	repeat, retry, err := cadence(cfg.Repeat, cfg.Retry)
	if err != nil {
		return nil, err
	}
	if repeat == 0 {
		repeat = DefaultRepeat
	}
	var rules []Rule
	for _, name := range []RuleName{RuleGPU, RuleDisk} {
		rules = append(rules, &KernelRule{name: name, repeat: repeat, retry: retry, incidents: map[string]*faultIncident{}})
	}
	return rules, nil
}

// Name is "gpu" or "disk".
func (r *KernelRule) Name() RuleName { return r.name }

func (r *KernelRule) takes(f KernelFault) bool {
	switch f.Kind {
	case kmsg.Xid, kmsg.FallenOffBus:
		return r.name == RuleGPU
	case kmsg.Storage:
		return r.name == RuleDisk
	}
	return false
}

// Fault pushes the first record of a fault at once and counts its repeats.
func (r *KernelRule) Fault(f KernelFault, now time.Time) []Alert {
	if !r.takes(f) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := f.key()
	if inc, ok := r.incidents[k]; ok && inc.open(now, r.repeat) {
		if f.Echoes(inc.fault.Fault) {
			// The same lost GPU said the other way: the Xid says more.
			if f.Kind == kmsg.Xid {
				f.Phase, f.ByPID = pickPhase(f, inc.fault)
				inc.fault = f
			}
			return nil
		}
		inc.held++
		if inc.fault.Phase == "" && f.Phase != "" {
			inc.fault.Phase, inc.fault.ByPID = f.Phase, f.ByPID
		}
		return nil
	}
	if len(r.incidents) >= maxIncidents {
		r.evictOldest()
	}
	inc := &faultIncident{fault: f, began: now, window: now, inFlight: true}
	r.incidents[k] = inc
	return []Alert{inc.alert(r.name, Firing, 0, now)}
}

// open reports whether a record at now belongs to the incident: its push
// is on its way or waits for a retry, its window lasts, or the window
// ended with repeats whose count the next Observe has yet to push. In a
// flood the next record always comes before that poll; a new incident
// there would drop the count and push the same fault as new again.
func (inc *faultIncident) open(now time.Time, repeat time.Duration) bool {
	return inc.pending || inc.inFlight || inc.held > 0 || now.Before(inc.window.Add(repeat))
}

// pickPhase keeps the phase named by a pid over one that only ran.
func pickPhase(a, b KernelFault) (string, bool) {
	if a.Phase != "" && (a.ByPID || !b.ByPID) {
		return a.Phase, a.ByPID
	}
	return b.Phase, b.ByPID
}

func (r *KernelRule) evictOldest() {
	var oldest string
	for k, inc := range r.incidents {
		if oldest == "" || inc.window.Before(r.incidents[oldest].window) {
			oldest = k
		}
	}
	delete(r.incidents, oldest)
}

func (inc *faultIncident) alert(rule RuleName, status Status, repeats int, now time.Time) Alert {
	return Alert{Rule: rule, Status: status, Began: inc.began, At: now, Fault: inc.fault, Repeats: repeats,
		Window: now.Sub(inc.window), Phase: inc.fault.Phase}
}

// Observe pushes the count of a window's repeats when the window ends, and
// retries a push no target accepted; an incident whose window passed
// without repeats is over.
func (r *KernelRule) Observe(_ Sample, now time.Time) []Alert {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Alert
	for k, inc := range r.incidents {
		switch {
		case inc.inFlight:
		case inc.pending:
			if !now.Before(inc.retryAt) {
				status := Firing
				if !inc.window.Equal(inc.began) {
					status = Reminder
				}
				out = append(out, inc.alert(r.name, status, inc.held, now))
				inc.held, inc.inFlight = 0, true
			}
		case now.Before(inc.window.Add(r.repeat)):
		case inc.held > 0:
			out = append(out, inc.alert(r.name, Reminder, inc.held, now))
			inc.held, inc.inFlight = 0, true
		default:
			delete(r.incidents, k)
		}
	}
	return out
}

// Pushed learns whether the push of a reached a phone.
func (r *KernelRule) Pushed(a Alert, delivered bool, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	inc, ok := r.incidents[a.Fault.key()]
	if !ok || !inc.began.Equal(a.Began) {
		return
	}
	inc.inFlight = false
	if delivered {
		inc.pending, inc.retryAt, inc.backoff = false, time.Time{}, 0
		inc.window = now
		return
	}
	// The repeats the failed push carried are told again by the retry.
	inc.held += a.Repeats
	inc.pending = true
	inc.backoff = backoff.Next(inc.backoff, r.retry, r.repeat)
	inc.retryAt = now.Add(inc.backoff)
}

// State: armed while no fault is being counted or retried; Since is when
// the oldest such fault came.
func (r *KernelRule) State() RuleState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := RuleState{Name: r.name, Armed: len(r.incidents) == 0}
	for _, inc := range r.incidents {
		if st.Since.IsZero() || inc.began.Before(st.Since) {
			st.Since = inc.began
		}
		st.Undelivered = st.Undelivered || inc.pending
	}
	return st
}

// Faults hands faults of the kernel log to the event rules and pushes what
// they raise at once, from the watchdog's event goroutine (started by
// Run), so neither the reader of the log nor a poll waits for Bark. It
// never blocks: faults of a flood are folded into the rules' counts as
// they come.
func (w *Watchdog) Faults(faults []KernelFault) {
	now := w.cfg.Now()
	var push []Alert
	for _, r := range w.cfg.Rules {
		er, ok := r.(EventRule)
		if !ok {
			continue
		}
		for _, f := range faults {
			push = append(push, er.Fault(f, now)...)
		}
	}
	w.publishEvents()
	if len(push) == 0 {
		return
	}
	w.eventMu.Lock()
	w.events = append(w.events, push...)
	w.eventMu.Unlock()
	select {
	case w.eventReady <- struct{}{}:
	default:
	}
}

// runEvents pushes the event rules' alerts as Faults queues them. At a
// stop it pushes what is queued still: a fault the kernel logged just
// before the stop is told, not dropped.
func (w *Watchdog) runEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			w.pushEvents(ctx)
			return
		case <-w.eventReady:
			w.pushEvents(ctx)
		}
	}
}

// pushEvents sends the queued event alerts as one push and tells each
// rule whether its alert reached a phone.
func (w *Watchdog) pushEvents(ctx context.Context) {
	w.eventMu.Lock()
	push := w.events
	w.events = nil
	w.eventMu.Unlock()
	if len(push) == 0 {
		return
	}
	ok, failed := w.cfg.Push.Push(context.WithoutCancel(ctx), push)
	delivered := ok > 0 || failed == 0
	now := w.cfg.Now()
	for _, a := range push {
		for _, r := range w.cfg.Rules {
			if r.Name() == a.Rule {
				r.Pushed(a, delivered, now)
			}
		}
	}
	w.publishEvents()
	// The fault is kept for a restart now, not at the next poll. A poll
	// under way reports it as it ends (and the next poll if it had just
	// reported): waiting for its push here would hold the next fault's.
	if w.mu.TryLock() {
		w.reportOpenLocked()
		w.mu.Unlock()
	}
}

// publishEvents is publish for the event rules alone: they guard
// themselves, while the polled rules belong to the poll's goroutine.
func (w *Watchdog) publishEvents() {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	for i, r := range w.cfg.Rules {
		if _, ok := r.(EventRule); !ok || i >= len(w.states) {
			continue
		}
		w.states[i] = r.State()
		w.ruleArmed.WithLabelValues(string(r.Name())).Set(boolFloat(w.states[i].Armed))
	}
}
