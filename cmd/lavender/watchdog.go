package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/prometheus/client_golang/prometheus"

	"lavender/exporter"
	"lavender/kmsg"
	"lavender/phaseserver"
	"lavender/watchdog"
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

	PhaseNotify     []string      `name:"phase.notify" default:"${phase_notify}" help:"Phase events the watchdog pushes: failed (a phase ends failed), stalled (no heartbeat, or no new step, for --phase.stall-after), loss (a phase's loss turns NaN or infinite), done (a phase ends ok). Empty: none."`
	PhaseStallAfter time.Duration `name:"phase.stall-after" default:"${phase_stall_after}" help:"How long an active phase may send no heartbeat, or ping without a new step, before it counts as stalled (at least 1m); 0 turns the stalled push off."`
}

// watchdogVars are the flags' defaults, from the packages that own them.
var watchdogVars = kong.Vars{
	"watchdog_interval":           flagDuration(watchdog.DefaultInterval),
	"watchdog_threshold":          fmt.Sprint(watchdog.DefaultThreshold),
	"watchdog_pressure_threshold": fmt.Sprint(watchdog.DefaultPressureThreshold),
	"watchdog_repeat":             flagDuration(watchdog.DefaultRepeat),
	"watchdog_hysteresis":         fmt.Sprint(watchdog.DefaultHysteresis),
	"kmsg_path":                   kmsg.DefaultPath,
	"phase_notify":                strings.Join(watchdog.DefaultPhaseNotify, ","),
	"phase_stall_after":           flagDuration(watchdog.DefaultStallAfter),
}

// flagDuration writes a default as a person would type it: "10m", not
// time.Duration's "10m0s", and "60s" rather than "1m" under two minutes.
func flagDuration(d time.Duration) string {
	if d < 2*time.Minute && d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (f *watchdogFlags) enabled() bool { return f.WatchdogInterval > 0 }

// rules checks every watchdog flag, even with the watchdog off, so a bad
// value never passes silently; errors name the flag.
func (f *watchdogFlags) rules() ([]watchdog.Rule, error) {
	if f.WatchdogInterval < 0 {
		return nil, fmt.Errorf("--watchdog.interval must not be negative, not %s", f.WatchdogInterval)
	}
	rules, err := watchdog.NewRules(watchdog.RuleFlags{
		Interval:          f.WatchdogInterval,
		Threshold:         f.WatchdogThreshold,
		Hysteresis:        f.WatchdogHysteresis,
		Repeat:            f.WatchdogRepeat,
		PressureThreshold: f.WatchdogPressureThreshold,
		OOM:               f.WatchdogOOM,
	})
	if err != nil {
		return nil, err
	}
	// Never nil: an empty --phase.notify means no phase push, not the
	// default list.
	notify := []string{}
	for _, n := range f.PhaseNotify {
		if n != "" {
			notify = append(notify, n)
		}
	}
	phase, err := watchdog.NewPhaseRules(watchdog.PhaseConfig{
		Notify:     notify,
		StallAfter: f.PhaseStallAfter,
		Repeat:     f.WatchdogRepeat,
		Retry:      f.WatchdogInterval,
	})
	if err != nil {
		return nil, err
	}
	return append(rules, phase...), nil
}

// newWatchdog builds serve's watchdog: with the watchdog on, the rules, the
// pusher and the metrics; off, a sampler for the status page alone, every
// history step, with no rules and no watchdog metrics.
func (f *watchdogFlags) newWatchdog(read watchdog.Reader, history *watchdog.History, push watchdog.Pusher, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time, more ...watchdog.Rule) (*watchdog.Watchdog, error) {
	rules, err := f.rules()
	if err != nil {
		return nil, err
	}
	rules = append(rules, more...)
	if !f.enabled() {
		return watchdog.New(watchdog.Config{Interval: history.Step(), Read: read, History: history, Now: now})
	}
	return watchdog.New(watchdog.Config{
		Interval: f.WatchdogInterval, Read: read, Rules: rules, Push: push,
		History: history, Logger: logger, Registerer: reg, Now: now,
	})
}

// hostReader reads the host for the watchdog: swap, pressure and OOM kills
// from procfs, the victim from the kernel log, the phases from the
// phase server's table.
func hostReader(procfs string, klog *kernelLog, exp *phaseserver.Server) watchdog.Reader {
	var judged victimJudge
	return func(ctx context.Context) (watchdog.Sample, error) {
		h, err := exporter.ReadHost(ctx, procfs)
		if err != nil {
			return watchdog.Sample{}, err
		}
		s := watchdog.Sample{
			Swap:     watchdog.Swap{UsedBytes: h.Swap.UsedBytes, TotalBytes: h.Swap.TotalBytes, Ratio: h.Swap.UsedRatio},
			Pressure: watchdog.Pressure{Available: h.Pressure.Available, Some: h.Pressure.SomeAvg10, Full: h.Pressure.FullAvg10},
			OOM:      watchdog.OOM{Available: h.HaveOOMKills, Kills: h.OOMKills},
		}
		v := klog.victim()
		s.OOM.Victim = judged.of(watchdog.Victim{PID: v.PID, Name: v.Name, Seq: v.Seq}, exp)
		// A phase whose process died without an end ends now, failed, so
		// this very poll pushes it.
		exp.CheckProcesses()
		_, phases := exp.Snapshot()
		s.Phases = phases
		s.Ends = exp.Ends()
		return s, nil
	}
}

// victimJudge says whose process an OOM victim was, once per kernel log
// record: at the first poll that sees it, the closest to the kill.
type victimJudge struct{ last watchdog.Victim }

func (j *victimJudge) of(v watchdog.Victim, exp *phaseserver.Server) watchdog.Victim {
	if !v.Known() {
		return v
	}
	if v.Same(j.last) {
		return j.last
	}
	phase, owner := exp.OwnerOf(v.PID, v.Name)
	switch owner {
	case phaseserver.OwnerPhase:
		v.Owner, v.Phase = watchdog.VictimOfPhase, phase
	case phaseserver.OwnerNone:
		v.Owner = watchdog.VictimOfNoPhase
	}
	j.last = v
	return v
}
