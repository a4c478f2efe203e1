package watchdog

import (
	"fmt"
	"time"
)

// Defaults of the rules. The predecessor polled swap every 10 minutes; a
// host can go from 50 % swap to an OOM kill in less, so the watchdog polls
// every few seconds and keeps the 10-minute cadence only for reminders.
const (
	DefaultInterval          = 5 * time.Second
	DefaultThreshold         = 0.5 // swap used ratio
	DefaultHysteresis        = 0.05
	DefaultRepeat            = 10 * time.Minute
	DefaultPressureThreshold = 0.10 // some avg10: psi-notify's and nohang's warning level
)

// SwapConfig tunes the swap rule. The error messages name the flags that
// set these fields.
type SwapConfig struct {
	Threshold  float64       // push at or above this used ratio, (0, 1]
	Hysteresis float64       // re-arm once the ratio is this far below Threshold, [0, Threshold)
	Repeat     time.Duration // reminder while swap stays high; 0: none
	Retry      time.Duration // first retry after a push no target accepted (the poll interval); 0: DefaultInterval
}

// SwapRule pushes once when swap use crosses the threshold, then a reminder
// every Repeat while it stays there. It re-arms only after the ratio falls
// Hysteresis below the threshold, so a ratio hovering at the line does not
// buzz the phone on every poll. A host without swap never pushes.
type SwapRule struct {
	cfg SwapConfig
	ep  episode
}

// NewSwapRule checks cfg and returns the rule, armed.
func NewSwapRule(cfg SwapConfig) (*SwapRule, error) {
	switch {
	case !(cfg.Threshold > 0 && cfg.Threshold <= 1):
		return nil, fmt.Errorf("--watchdog.threshold must be in (0, 1], not %g", cfg.Threshold)
	case !(cfg.Hysteresis >= 0 && cfg.Hysteresis < cfg.Threshold):
		return nil, fmt.Errorf("--watchdog.hysteresis must be in [0, --watchdog.threshold %g), not %g", cfg.Threshold, cfg.Hysteresis)
	}
	repeat, retry, err := cadence(cfg.Repeat, cfg.Retry)
	if err != nil {
		return nil, err
	}
	return &SwapRule{cfg: cfg, ep: episode{repeat: repeat, retry: retry}}, nil
}

// Name is RuleSwap.
func (r *SwapRule) Name() RuleName { return RuleSwap }

// Observe pushes on a crossing, reminds while swap stays high, and
// resolves once swap is clearly below the threshold again.
func (r *SwapRule) Observe(s Sample, now time.Time) []Alert {
	if s.Swap.TotalBytes == 0 {
		return nil // no swap: nothing can page, and the ratio is 0 by definition
	}
	return r.ep.level(r.Name(), s.Swap.Ratio, r.cfg.Threshold, r.cfg.Hysteresis, s, now)
}

// Pushed learns the outcome of a firing or reminder push; a resolution is
// not retried.
func (r *SwapRule) Pushed(a Alert, delivered bool, now time.Time) {
	if a.Status != Resolved {
		r.ep.pushed(delivered, now)
	}
}

// State reports whether the rule is armed, and since when it is not.
func (r *SwapRule) State() RuleState { return r.ep.state(r.Name()) }

// cadence checks the reminder and retry durations every rule shares.
func cadence(repeat, retry time.Duration) (time.Duration, time.Duration, error) {
	switch {
	case repeat < 0:
		return 0, 0, fmt.Errorf("--watchdog.repeat must not be negative, not %s", repeat)
	case retry < 0:
		return 0, 0, fmt.Errorf("--watchdog.interval must not be negative, not %s", retry)
	case retry == 0:
		retry = DefaultInterval
	}
	return repeat, retry, nil
}
