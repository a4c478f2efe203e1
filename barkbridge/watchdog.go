package barkbridge

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

// Watchdog defaults: the predecessor polled every 10 minutes; a host can go
// from 50 % swap to an OOM kill in less, so the watchdog polls every few
// seconds and keeps the 10-minute cadence only for reminders.
const (
	DefaultWatchdogInterval   = 5 * time.Second
	DefaultWatchdogThreshold  = 0.5
	DefaultWatchdogRepeat     = 10 * time.Minute
	DefaultWatchdogHysteresis = 0.05
)

// WatchdogConfig tunes the built-in swap watchdog.
type WatchdogConfig struct {
	Interval   time.Duration // time between polls
	Threshold  float64       // push at or above this used ratio
	Repeat     time.Duration // reminder while swap stays high; 0: none
	Hysteresis float64       // re-arm once the ratio is this far below Threshold
	Now        func() time.Time
}

func (c WatchdogConfig) validate() error {
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("barkbridge: watchdog interval %s must be positive", c.Interval)
	case !(c.Threshold > 0 && c.Threshold <= 1):
		return fmt.Errorf("barkbridge: watchdog threshold %g must be in (0, 1]", c.Threshold)
	case c.Repeat < 0:
		return fmt.Errorf("barkbridge: watchdog repeat %s must not be negative", c.Repeat)
	case !(c.Hysteresis >= 0 && c.Hysteresis < c.Threshold):
		return fmt.Errorf("barkbridge: watchdog hysteresis %g must be in [0, threshold %g)", c.Hysteresis, c.Threshold)
	}
	return nil
}

// SwapReader reads the host's swap figures; exporter.ReadSwap is the real one.
type SwapReader func(ctx context.Context) (SwapFigures, error)

// SwapPusher pushes the swap message; *Bridge is the real one, so the
// watchdog and the webhook share one formatter, sender and log line.
type SwapPusher interface {
	PushSwap(ctx context.Context, s SwapFigures) (ok, failed int)
}

// Watchdog polls swap and pushes once when it crosses the threshold, then a
// reminder every Repeat while it stays there. It re-arms only after the
// ratio falls Hysteresis below the threshold, so a ratio hovering at the
// line does not buzz the phone on every poll.
type Watchdog struct {
	cfg    WatchdogConfig
	read   SwapReader
	push   SwapPusher
	logger *slog.Logger

	polls, errs prometheus.Counter
	armedGauge  prometheus.Gauge

	mu       sync.Mutex // one poll at a time
	armed    bool
	lastSent time.Time     // last push of this episode that reached Bark or had no target
	retryAt  time.Time     // after a push no target accepted: when to try again
	backoff  time.Duration // doubles while every push fails, up to Repeat
}

// NewWatchdog registers the watchdog's metrics with reg (nil: none).
func NewWatchdog(cfg WatchdogConfig, read SwapReader, push SwapPusher, logger *slog.Logger, reg prometheus.Registerer) (*Watchdog, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Watchdog{
		cfg: cfg, read: read, push: push, logger: logger, armed: true,
		polls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lavender_watchdog_polls_total",
			Help: "Swap polls made by the built-in watchdog.",
		}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lavender_watchdog_errors_total",
			Help: "Watchdog polls that could not read swap.",
		}),
		armedGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lavender_watchdog_armed",
			Help: "1 while the watchdog will push on the next crossing of its threshold, 0 after it pushed and until swap falls below threshold minus hysteresis.",
		}),
	}
	w.armedGauge.Set(1)
	if reg != nil {
		for _, c := range []prometheus.Collector{w.polls, w.errs, w.armedGauge} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("barkbridge: register watchdog metrics: %w", err)
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
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Poll(ctx)
		}
	}
}

// Poll reads swap once and pushes if it is due. Errors are logged and
// counted; they never stop the watchdog.
func (w *Watchdog) Poll(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polls.Inc()
	s, err := w.read(ctx)
	if err != nil {
		w.errs.Inc()
		w.logger.Error(fmt.Sprintf("[swap watchdog] error: %s: %v", errorClass(err), err))
		return
	}
	now := w.cfg.Now()
	switch {
	case s.TotalBytes == 0:
		// No swap: nothing can page, and the ratio is 0 by definition.
	case s.Ratio >= w.cfg.Threshold:
		if w.due(now) {
			w.send(ctx, s, now)
		}
	case s.Ratio < w.cfg.Threshold-w.cfg.Hysteresis:
		w.armed, w.lastSent, w.retryAt, w.backoff = true, time.Time{}, time.Time{}, 0
	}
	w.armedGauge.Set(boolFloat(w.armed))
}

func (w *Watchdog) due(now time.Time) bool {
	switch {
	case !w.retryAt.IsZero():
		return !now.Before(w.retryAt)
	case w.armed:
		return true
	default:
		return w.cfg.Repeat > 0 && !now.Before(w.lastSent.Add(w.cfg.Repeat))
	}
}

// send pushes, and on a push that no target accepted schedules a retry with
// a backoff, so a Bark outage neither loses the warning nor fills the run log.
func (w *Watchdog) send(ctx context.Context, s SwapFigures, now time.Time) {
	// Disarm before the push goes out, so that lavender_watchdog_armed is
	// already 0 when the phone (or a test's Bark server) sees the push.
	w.armed = false
	w.armedGauge.Set(0)
	ok, failed := w.push.PushSwap(ctx, s)
	if ok > 0 || failed == 0 {
		w.lastSent, w.retryAt, w.backoff = now, time.Time{}, 0
		return
	}
	w.backoff = max(w.cfg.Interval, 2*w.backoff)
	if w.cfg.Repeat > 0 {
		w.backoff = min(w.backoff, w.cfg.Repeat)
	}
	w.retryAt = now.Add(w.backoff)
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
