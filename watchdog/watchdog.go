// Package watchdog is lavender serve's built-in watchdog: one sampler loop
// reads the host every interval, records the reading in a History for the
// status page, and feeds it to the rules (swap, memory pressure, OOM kills),
// each a small state machine that decides what to push. When several rules
// fire in one poll, one push carries them all.
//
// The package imports nothing of lavender's: cmd injects the host reader
// (from the exporter) and the Pusher (watchpush, which words the alerts
// with pushtext and hands them to delivery).
package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Pusher sends one push carrying alerts (several when several rules fired
// in the same poll) to every target, and says how many targets accepted it
// and how many failed. watchpush provides it, so the watchdog and the
// webhook share one delivery pipeline and run-log line. A sender that does
// not push some alerts (resolutions, say) leaves them out and answers
// (0, 0) for a push left empty: the rules then count it as delivered.
//
// The watchdog's stop never cancels the context a push is given: a push on
// the wire when the process is told to stop finishes, bounded by the
// pusher's own timeout. Cut off, it would be lost, or counted failed after
// Bark had it.
type Pusher interface {
	Push(ctx context.Context, alerts []Alert) (ok, failed int)
}

// PushFunc adapts a function to Pusher.
type PushFunc func(ctx context.Context, alerts []Alert) (ok, failed int)

// Push calls f.
func (f PushFunc) Push(ctx context.Context, alerts []Alert) (ok, failed int) { return f(ctx, alerts) }

// Config wires a Watchdog.
type Config struct {
	Interval time.Duration // between polls (default DefaultInterval)
	Read     Reader        // required
	Rules    []Rule        // none: the watchdog only samples, for the page
	Push     Pusher        // required when there are rules
	History  *History      // nil: no history kept
	Logger   *slog.Logger  // nil: discard
	// Registerer gets the watchdog's metrics; nil: none. A watchdog that
	// only samples for the page (the watchdog turned off) should get nil,
	// so that no watchdog metrics appear.
	Registerer prometheus.Registerer
	Now        func() time.Time // default time.Now
	// OnOpen learns the rules' open incidents after a poll that changed
	// them (an incident opened, reminded, delivered or ended), for the
	// command to keep across a restart and hand back to Restore; nil:
	// nothing is kept. It runs within the poll.
	OnOpen func([]OpenIncident)
}

// Watchdog polls the host and pushes what its rules decide.
type Watchdog struct {
	cfg Config

	polls, errs prometheus.Counter
	swapArmed   prometheus.Gauge // nil without a swap rule
	ruleArmed   *prometheus.GaugeVec

	mu      sync.Mutex     // one poll at a time
	carried []OpenIncident // the open incidents OnOpen last learned

	stateMu sync.Mutex // guards states alone, so readers never wait behind a push
	states  []RuleState

	// The event path (Faults): alerts waiting for the event goroutine.
	eventMu    sync.Mutex
	events     []Alert
	eventReady chan struct{}
}

// New checks cfg and registers the metrics.
func New(cfg Config) (*Watchdog, error) {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("--watchdog.interval must not be negative, not %s", cfg.Interval)
	}
	if cfg.Read == nil {
		return nil, errors.New("watchdog: no reader")
	}
	if len(cfg.Rules) > 0 && cfg.Push == nil {
		return nil, errors.New("watchdog: rules but no pusher")
	}
	seen := map[RuleName]bool{}
	for _, r := range cfg.Rules {
		if seen[r.Name()] {
			return nil, fmt.Errorf("watchdog: two rules named %q", r.Name())
		}
		seen[r.Name()] = true
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &Watchdog{
		cfg:        cfg,
		eventReady: make(chan struct{}, 1),
		polls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lavender_watchdog_polls_total",
			Help: "Polls of the host made by the built-in watchdog.",
		}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lavender_watchdog_errors_total",
			Help: "Watchdog polls that could not read the host.",
		}),
		ruleArmed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lavender_watchdog_rule_armed",
			Help: "1 while the watchdog rule will push on the next crossing of its threshold, 0 from its push until the incident ends.",
		}, []string{"rule"}),
	}
	collectors := []prometheus.Collector{w.polls, w.errs, w.ruleArmed}
	if seen[RuleSwap] {
		// Kept beside the labelled series for the dashboards and scripts
		// that read it from before the watchdog had more than one rule.
		w.swapArmed = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lavender_watchdog_armed",
			Help: "1 while the watchdog will push on the next crossing of its swap threshold, 0 after it pushed and until swap falls below threshold minus hysteresis.",
		})
		collectors = append(collectors, w.swapArmed)
	}
	w.publish()
	if reg := cfg.Registerer; reg != nil {
		for _, c := range collectors {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("watchdog: register metrics: %w", err)
			}
		}
	}
	return w, nil
}

// Run polls every Interval until ctx ends. Callers make the first poll
// themselves with Poll, before they report ready, so a host that is already
// paging gets its push at once.
func (w *Watchdog) Run(ctx context.Context) {
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	events := make(chan struct{})
	go func() {
		defer close(events)
		w.runEvents(ctx)
	}()
	defer func() { <-events }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Poll(ctx)
		}
	}
}

// Poll reads the host once, records the reading, lets every rule observe
// it, and sends what they raised as one push. A read error is logged and
// counted; it never stops the watchdog.
func (w *Watchdog) Poll(ctx context.Context) { w.poll(ctx, false) }

// PollAtStop is the last poll, once Run has returned and no more heartbeats
// come: an end accepted since the last poll, or one held to settle
// (DoneSettle, OutsideSettle), is pushed now, or never (a restarted serve
// takes the ends it finds as old news). Call it before the pusher closes,
// with a ctx that bounds the stop.
func (w *Watchdog) PollAtStop(ctx context.Context) { w.poll(ctx, true) }

func (w *Watchdog) poll(ctx context.Context, stopping bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polls.Inc()
	s, err := w.cfg.Read(ctx)
	now := w.cfg.Now()
	if err != nil {
		w.errs.Inc()
		// The predecessor's line, which docs/watchdog.md quotes.
		w.cfg.Logger.Error(fmt.Sprintf("[swap watchdog] error: %s: %v", errorClass(err), err))
		if w.cfg.History != nil {
			w.cfg.History.RecordError(err)
		}
		return
	}
	s.Time, s.Stopping = now, stopping
	if w.cfg.History != nil {
		w.cfg.History.Record(s)
	}

	raised := make([][]Alert, len(w.cfg.Rules))
	var push []Alert
	for i, r := range w.cfg.Rules {
		raised[i] = r.Observe(s, now)
		push = append(push, raised[i]...)
	}
	// Rules disarm in Observe: publish before the push leaves, so whoever
	// sees the push never sees the rule armed.
	w.publish()
	defer w.reportOpenLocked()
	if len(push) == 0 {
		return
	}
	ok, failed := w.cfg.Push.Push(context.WithoutCancel(ctx), push)
	delivered := ok > 0 || failed == 0
	for i, r := range w.cfg.Rules {
		for _, a := range raised[i] {
			r.Pushed(a, delivered, now)
		}
	}
	w.publish()
}

// State returns every rule's state, in the order of the rules. It never
// waits for a poll or a push.
func (w *Watchdog) State() []RuleState {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	return append([]RuleState(nil), w.states...)
}

// publish copies the rules' states to the gauges and to State's copy.
func (w *Watchdog) publish() {
	states := make([]RuleState, len(w.cfg.Rules))
	for i, r := range w.cfg.Rules {
		states[i] = r.State()
		w.ruleArmed.WithLabelValues(string(r.Name())).Set(boolFloat(states[i].Armed))
		if r.Name() == RuleSwap && w.swapArmed != nil {
			w.swapArmed.Set(boolFloat(states[i].Armed))
		}
	}
	w.stateMu.Lock()
	w.states = states
	w.stateMu.Unlock()
}

// errorClass names an error the way the predecessor printed Python's
// exception class: the type of the outermost error that is more than a
// wrapper, e.g. "PathError"; plain errors.New/fmt.Errorf text is "Error".
func errorClass(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		t := reflect.TypeOf(e)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Name() {
		case "", "wrapError", "wrapErrors", "joinError", "errorString":
		default:
			return t.Name()
		}
	}
	return "Error"
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
