package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/common/version"

	"lavender/barkbridge"
	"lavender/exporter"
	"lavender/runlog"
	"lavender/statuspage"
)

// ServeCmd is the whole product in one process: the exporter, the bridge
// and the built-in swap watchdog, on one listener and one registry.
type ServeCmd struct {
	webFlags
	runtimeFlags
	runlogFlags
	procfsFlags
	barkFlags

	RunHeader string `name:"run.header" placeholder:"TEXT" help:"Header text of the new run's log (default \"device=<cpu|cuda|mps> lavender=v<version>\")."`
	RunResume bool   `name:"run.resume" help:"Keep appending to the current run instead of starting a new one."`

	WatchdogInterval   time.Duration `name:"watchdog.interval" default:"5s" help:"How often the built-in watchdog reads swap; 0 turns it off (use that beside Prometheus and Alertmanager)."`
	WatchdogThreshold  float64       `name:"watchdog.threshold" default:"0.5" help:"Swap used ratio (0-1] at or above which the watchdog pushes."`
	WatchdogRepeat     time.Duration `name:"watchdog.repeat" default:"10m" help:"Reminder interval while swap stays above the threshold; 0 for none."`
	WatchdogHysteresis float64       `name:"watchdog.hysteresis" default:"0.05" help:"The watchdog re-arms once swap falls this far below the threshold."`
}

// Run serves until SIGINT or SIGTERM; a second signal exits at once.
func (c *ServeCmd) Run(g *Globals) error {
	if err := c.runtimeFlags.apply(g.Logger); err != nil {
		return err
	}
	ctx, stop := shutdownContext(g)
	defer stop()
	return c.serve(ctx, g, nil, nil)
}

// validateWatchdog names the flags, where barkbridge's own check of the
// same rules would name the package.
func (c *ServeCmd) validateWatchdog() error {
	if c.WatchdogInterval < 0 {
		return fmt.Errorf("--watchdog.interval must not be negative, not %s", c.WatchdogInterval)
	}
	if !(c.WatchdogThreshold > 0 && c.WatchdogThreshold <= 1) {
		return fmt.Errorf("--watchdog.threshold must be in (0, 1], not %g", c.WatchdogThreshold)
	}
	if c.WatchdogRepeat < 0 {
		return fmt.Errorf("--watchdog.repeat must not be negative, not %s", c.WatchdogRepeat)
	}
	if !(c.WatchdogHysteresis >= 0 && c.WatchdogHysteresis < c.WatchdogThreshold) {
		return fmt.Errorf("--watchdog.hysteresis must be in [0, --watchdog.threshold %g), not %g", c.WatchdogThreshold, c.WatchdogHysteresis)
	}
	return nil
}

func (c *ServeCmd) watchdogConfig() barkbridge.WatchdogConfig {
	return barkbridge.WatchdogConfig{
		Interval:   c.WatchdogInterval,
		Threshold:  c.WatchdogThreshold,
		Repeat:     c.WatchdogRepeat,
		Hysteresis: c.WatchdogHysteresis,
	}
}

// serve runs until ctx ends. Tests pass their own context and learn the
// bound address through onListen and readiness through onReady.
func (c *ServeCmd) serve(ctx context.Context, g *Globals, onListen func([]net.Addr), onReady func()) error {
	if err := c.validateBark(); err != nil {
		return err
	}
	if err := c.procfsFlags.validate(); err != nil {
		return err
	}
	if err := c.validateRunlog(); err != nil {
		return err
	}
	if err := c.validateWatchdog(); err != nil {
		return err
	}
	srv, err := newCommandServer(&c.webFlags, g.Logger, onListen)
	if err != nil {
		return err
	}
	defer srv.close()
	exp, closeExp, err := openExporter(c.procfsFlags, c.runlogFlags, g, srv.reg)
	if err != nil {
		return err
	}
	defer closeExp()
	bridge, err := barkbridge.New(c.barkConfig(c.logged(g)), g.Logger, srv.reg)
	if err != nil {
		return err
	}
	stopReload := reloadOnSIGHUP(bridge, g.Logger)
	defer stopReload()

	// The watchdog reads swap through the history, so the status page's
	// chart costs no extra reads; without a watchdog the history samples
	// by itself.
	history := exporter.NewSwapHistory(c.ProcFS, c.HistoryStep, nil)
	var watchdog *barkbridge.Watchdog
	if c.WatchdogInterval > 0 {
		readSwap := func(ctx context.Context) (barkbridge.SwapFigures, error) {
			s, err := history.Read(ctx)
			return barkbridge.SwapFigures{Ratio: s.UsedRatio, UsedBytes: s.UsedBytes, TotalBytes: s.TotalBytes}, err
		}
		watchdog, err = barkbridge.NewWatchdog(c.watchdogConfig(), readSwap, bridge, g.Logger, srv.reg)
		if err != nil {
			return err
		}
	}

	device := exporter.Device()
	if run, _ := exp.Snapshot(); c.RunResume && run != nil {
		// Entries after the last RUN stop must say the process came back.
		if err := exp.AppendToRun(runlog.RunResume + "  device=" + device); err != nil {
			g.Logger.Error("run log: RUN resume not written", "err", err)
		}
	} else {
		header := c.RunHeader
		if header == "" {
			header = fmt.Sprintf("device=%s lavender=v%s", device, version.Version)
		}
		// A full or read-only logs dir loses the record, never the pushes:
		// serve starts anyway, and later writes are counted in
		// lavender_runlog_write_errors_total.
		if _, err := exp.StartRun(header, runlog.RunStart+"  device="+device); err != nil {
			g.Logger.Error("run log not started; serving anyway", "err", err)
		}
	}

	exp.Register(srv.mux)
	bridge.Register(srv.mux)
	threshold := c.BarkThreshold
	if watchdog != nil {
		threshold = c.WatchdogThreshold
	}
	if err := registerStatusPage(srv.mux, exp, statuspage.Config{
		History:   statuspage.FromSwapHistory(history),
		Bark:      bridge.Status,
		Threshold: threshold,
	}); err != nil {
		return err
	}

	served := make(chan error, 1)
	go func() {
		// In-flight webhooks wait on Bark for at most the timeout: let them
		// finish so a push Bark accepted is answered 200, not retried.
		served <- srv.serve(ctx, &c.webFlags, c.BarkTimeout+webhookMargin, g.Logger)
	}()

	var background sync.WaitGroup
	if watchdog != nil {
		// The first poll comes before ready, so a host that is already
		// paging gets its push at once.
		watchdog.Poll(ctx)
		background.Go(func() { watchdog.Run(ctx) })
	} else {
		background.Go(func() { history.Run(ctx) })
	}
	srv.ready.set()
	g.Logger.Info("lavender serve ready", "version", version.Info(), "targets", len(bridge.Targets()),
		"watchdog_interval", c.WatchdogInterval, "runlog_dir", c.Dir)
	if onReady != nil {
		onReady()
	}

	err = <-served
	background.Wait()
	if logErr := exp.AppendToRun(runlog.RunStop); logErr != nil {
		g.Logger.Error("run log: RUN stop not written", "err", logErr)
	}
	return err
}
