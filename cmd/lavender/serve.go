package main

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/prometheus/common/version"

	"lavender/barkbridge"
	"lavender/exporter"
	"lavender/runlog"
	"lavender/statuspage"
	"lavender/watchdog"
)

// ServeCmd is the whole product in one process: the exporter, the bridge
// and the built-in watchdog, on one listener and one registry.
type ServeCmd struct {
	webFlags
	runtimeFlags
	runlogFlags
	procfsFlags
	barkFlags
	watchdogFlags

	RunHeader string `name:"run.header" placeholder:"TEXT" help:"Header text of the new run's log (default \"device=<cpu|cuda|mps> lavender=v<version>\")."`
	RunResume bool   `name:"run.resume" help:"Keep appending to the current run instead of starting a new one."`
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
	if _, err := c.rules(); err != nil {
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
	stopStorm := runBridge(ctx, bridge)
	defer stopStorm()

	// One sampler feeds the status page's history and, when on, the
	// watchdog's rules, so the page costs no reads of its own.
	victims := c.openVictims(g.Logger)
	if victims != nil {
		defer victims.Close()
	}
	history := watchdog.NewHistory(c.HistoryStep)
	wd, err := c.newWatchdog(hostReader(c.ProcFS, victims, exp, g.Logger), history, bridge, g.Logger, srv.reg)
	if err != nil {
		return err
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
	threshold, pressureThreshold := c.BarkThreshold, watchdog.DefaultPressureThreshold
	if c.enabled() {
		threshold = c.WatchdogThreshold
		if c.WatchdogPressureThreshold > 0 {
			pressureThreshold = c.WatchdogPressureThreshold
		}
	}
	if err := registerStatusPage(srv.mux, exp, statuspage.Config{
		History:           history,
		Rules:             wd.State,
		Bark:              bridge.Status,
		Threshold:         threshold,
		PressureThreshold: pressureThreshold,
	}); err != nil {
		return err
	}

	served := make(chan error, 1)
	go func() {
		// In-flight webhooks wait on Bark for at most the timeout: let them
		// finish so a push Bark accepted is answered 200, not retried.
		served <- srv.serve(ctx, &c.webFlags, c.BarkTimeout+webhookMargin, g.Logger)
	}()

	// The first poll comes before ready, so a host that is already paging
	// gets its push at once, and the OOM rule has its baseline: kills from
	// before the start never push.
	wd.Poll(ctx)
	var background sync.WaitGroup
	background.Go(func() { wd.Run(ctx) })
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
