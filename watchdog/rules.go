package watchdog

import "time"

// RuleFlags are the watchdog's flags, as cmd reads them; NewRules turns
// them into the rules, so cmd holds no rule logic.
type RuleFlags struct {
	Interval          time.Duration // --watchdog.interval: also the first retry after a failed push
	Threshold         float64       // --watchdog.threshold: swap used ratio
	Hysteresis        float64       // --watchdog.hysteresis: for swap and pressure alike
	Repeat            time.Duration // --watchdog.repeat
	PressureThreshold float64       // --watchdog.pressure-threshold; 0: no pressure rule
	OOM               bool          // --watchdog.oom
	// GPU turns on the GPU telemetry rules (NewGPURules), which read
	// Sample.GPUs; the durations are theirs, 0 turning one off.
	GPU              bool          // --watchdog.gpu
	GPUHangAfter     time.Duration // --watchdog.gpu-hang-after
	GPUIdleAfter     time.Duration // --watchdog.gpu-idle-after
	GPUSlowdownAfter time.Duration // --watchdog.gpu-slowdown-after
}

// DefaultRuleFlags are the flags' defaults.
var DefaultRuleFlags = RuleFlags{
	Interval:          DefaultInterval,
	Threshold:         DefaultThreshold,
	Hysteresis:        DefaultHysteresis,
	Repeat:            DefaultRepeat,
	PressureThreshold: DefaultPressureThreshold,
	OOM:               true,
	GPU:               true,
	GPUHangAfter:      DefaultGPUHangAfter,
	GPUIdleAfter:      DefaultGPUIdleAfter,
	GPUSlowdownAfter:  DefaultGPUSlowdownAfter,
}

// NewRules builds the rules the flags ask for, in the order their alerts
// appear in a push: swap, pressure, oom, gpu (the kernel log's), the GPU
// telemetry rules (gpu-lost … gpu-slowdown), disk. Errors name the flag
// at fault.
func NewRules(f RuleFlags) ([]Rule, error) {
	swap, err := NewSwapRule(SwapConfig{Threshold: f.Threshold, Hysteresis: f.Hysteresis, Repeat: f.Repeat, Retry: f.Interval})
	if err != nil {
		return nil, err
	}
	rules := []Rule{swap}
	// Checked even when 0, so a bad value never passes silently.
	pressure, err := NewPressureRule(PressureConfig{Threshold: f.PressureThreshold, Hysteresis: f.Hysteresis, Repeat: f.Repeat, Retry: f.Interval})
	if err != nil {
		return nil, err
	}
	if f.PressureThreshold > 0 {
		rules = append(rules, pressure)
	}
	if f.OOM {
		oom, err := NewOOMRule(OOMConfig{Repeat: f.Repeat, Retry: f.Interval})
		if err != nil {
			return nil, err
		}
		rules = append(rules, oom)
	}
	// The kernel log's faults: quiet unless the log is read and a fault
	// comes (Watchdog.Faults).
	kernel, err := NewKernelRules(KernelConfig{Repeat: f.Repeat, Retry: f.Interval})
	if err != nil {
		return nil, err
	}
	// kernel is the GPU rule, then the disk rule: the GPU telemetry's
	// rules go between, beside the kernel log's GPU faults.
	rules = append(rules, kernel[0])
	if f.GPU {
		gpuRules, err := NewGPURules(GPUConfig{HangAfter: f.GPUHangAfter, IdleAfter: f.GPUIdleAfter,
			SlowdownAfter: f.GPUSlowdownAfter, Repeat: f.Repeat, Retry: f.Interval})
		if err != nil {
			return nil, err
		}
		rules = append(rules, gpuRules...)
	}
	return append(rules, kernel[1:]...), nil
}
