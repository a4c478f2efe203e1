package watchdog

import (
	"fmt"
	"time"
)

// PressureConfig tunes the memory pressure rule.
type PressureConfig struct {
	// Threshold is the "some avg10" ratio at or above which the rule
	// pushes, [0, 1]; 0 turns the rule off.
	Threshold float64
	// Hysteresis: the rule re-arms once "some avg10" falls this far below
	// Threshold. cmd passes --watchdog.hysteresis, as for swap: with the
	// defaults the rule pushes at 10 % and re-arms below 5 %, so pressure
	// that flickers around the line (avg10 moves by several points a poll
	// while a host swaps) does not buzz the phone on every poll.
	Hysteresis float64
	Repeat     time.Duration // reminder while pressure stays high; 0: none
	Retry      time.Duration // first retry after a push no target accepted; 0: DefaultInterval
}

// PressureRule pushes when tasks stall on memory for a share of the last
// 10 s at or above the threshold, with the swap rule's hysteresis, reminders
// and backoff. Pressure warns of thrashing before swap fills, and while
// swap is full but idle it stays quiet. A kernel without PSI keeps it
// silent.
type PressureRule struct {
	cfg PressureConfig
	ep  episode
}

// NewPressureRule checks cfg and returns the rule, armed.
func NewPressureRule(cfg PressureConfig) (*PressureRule, error) {
	switch {
	case !(cfg.Threshold >= 0 && cfg.Threshold <= 1):
		return nil, fmt.Errorf("--watchdog.pressure-threshold must be in [0, 1], not %g", cfg.Threshold)
	case cfg.Threshold > 0 && !(cfg.Hysteresis >= 0 && cfg.Hysteresis < cfg.Threshold):
		return nil, fmt.Errorf("--watchdog.hysteresis must be in [0, --watchdog.pressure-threshold %g), not %g", cfg.Threshold, cfg.Hysteresis)
	}
	repeat, retry, err := cadence(cfg.Repeat, cfg.Retry)
	if err != nil {
		return nil, err
	}
	return &PressureRule{cfg: cfg, ep: episode{repeat: repeat, retry: retry}}, nil
}

// Name is RulePressure.
func (r *PressureRule) Name() RuleName { return RulePressure }

// Observe pushes when "some avg10" reaches the threshold, reminds while it
// stays there, and resolves once it is clearly below.
func (r *PressureRule) Observe(s Sample, now time.Time) []Alert {
	if r.cfg.Threshold == 0 || !s.Pressure.Available {
		return nil // off, or a kernel without PSI: nothing to say either way
	}
	return r.ep.level(r.Name(), s.Pressure.Some, r.cfg.Threshold, r.cfg.Hysteresis, s, now)
}

// Pushed learns the outcome of a firing or reminder push; a resolution is
// not retried.
func (r *PressureRule) Pushed(a Alert, delivered bool, now time.Time) {
	if a.Status != Resolved {
		r.ep.pushed(delivered, now)
	}
}

// State reports whether the rule is armed, and since when it is not.
func (r *PressureRule) State() RuleState { return r.ep.state(r.Name()) }
