package main

import (
	"time"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/watchdog"
)

// watchdogFlags are serve's built-in watchdog. Defaults come from the
// watchdog package's constants.
type watchdogFlags struct {
	WatchdogInterval          time.Duration `name:"watchdog.interval" default:"${watchdog_interval}" help:"How often the built-in watchdog reads swap, memory pressure and OOM kills; 0 turns it off (use that beside Prometheus and Alertmanager): the status page is then still sampled every --status.history-step."`
	WatchdogThreshold         float64       `name:"watchdog.threshold" default:"${watchdog_threshold}" help:"Swap used ratio (0-1] at or above which the watchdog pushes."`
	WatchdogPressureThreshold float64       `name:"watchdog.pressure-threshold" default:"${watchdog_pressure_threshold}" help:"Memory pressure (PSI some avg10, a ratio 0-1) at or above which the watchdog pushes; 0 turns the pressure rule off."`
	WatchdogOOM               bool          `name:"watchdog.oom" default:"true" negatable:"" help:"Push at once when the OOM killer kills a process; --no-watchdog.oom turns it off."`
	WatchdogRepeat            time.Duration `name:"watchdog.repeat" default:"${watchdog_repeat}" help:"Reminder interval while swap or pressure stays above its threshold, or a phase stays stalled; 0 for none."`
	WatchdogHysteresis        float64       `name:"watchdog.hysteresis" default:"${watchdog_hysteresis}" help:"The watchdog re-arms once swap or pressure falls this far below its threshold."`

	WatchdogGPU              bool          `name:"watchdog.gpu" default:"true" negatable:"" help:"Push what the GPUs themselves show (NVML; needs --gpu): a hung collective, idle GPUs, a lost GPU, row remapping, new uncorrectable ECC errors, a hardware slowdown; --no-watchdog.gpu turns these rules off."`
	WatchdogGPUHangAfter     time.Duration `name:"watchdog.gpu-hang-after" default:"${watchdog_gpu_hang_after}" help:"How long a running phase's GPUs may be busy while drawing near-idle power with no new step before it counts as a hung collective (at least 1m); 0 turns it off."`
	WatchdogGPUIdleAfter     time.Duration `name:"watchdog.gpu-idle-after" default:"${watchdog_gpu_idle_after}" help:"How long a running phase's GPUs may sit idle with no progress (evaluation and saving pings count) before it pushes (at least 1m); 0 turns it off."`
	WatchdogGPUSlowdownAfter time.Duration `name:"watchdog.gpu-slowdown-after" default:"${watchdog_gpu_slowdown_after}" help:"How long a GPU may be held in a hardware, thermal or power-brake slowdown before it pushes (at least 1m); 0 turns it off. A power cap alone never pushes."`

	PhaseNotify     []string      `name:"phase.notify" default:"${phase_notify}" help:"Phase events the watchdog pushes: failed (a phase ends failed), stalled (no heartbeat, or no new step, for --phase.stall-after), loss (a phase's loss turns NaN or infinite), done (a phase ends ok). Empty: none."`
	PhaseStallAfter time.Duration `name:"phase.stall-after" default:"${phase_stall_after}" help:"How long an active phase may send no heartbeat, or ping without a new step, before it counts as stalled (at least 1m); 0 turns the stalled push off."`
}

// watchdogOptions are the watchdog's flags as app takes them, checked by
// app.NewWatchdogOptions; errors name the flag.
func (c *ServeCmd) watchdogOptions() (app.WatchdogOptions, error) {
	f := &c.watchdogFlags
	rules := watchdog.RuleFlags{
		Interval:          f.WatchdogInterval,
		Threshold:         f.WatchdogThreshold,
		Hysteresis:        f.WatchdogHysteresis,
		Repeat:            f.WatchdogRepeat,
		PressureThreshold: f.WatchdogPressureThreshold,
		OOM:               f.WatchdogOOM,
		GPU:               f.WatchdogGPU,
		GPUHangAfter:      f.WatchdogGPUHangAfter,
		GPUIdleAfter:      f.WatchdogGPUIdleAfter,
		GPUSlowdownAfter:  f.WatchdogGPUSlowdownAfter,
	}
	return app.NewWatchdogOptions(rules, f.PhaseNotify, f.PhaseStallAfter, c.WatchdogDiskMinFree)
}
