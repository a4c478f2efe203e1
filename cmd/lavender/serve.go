package main

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/prometheus/common/version"

	"lavender/delivery"
	"lavender/diskguard"
	"lavender/exporter"
	"lavender/phaseserver"
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
	kernelLogFlags
	diskFlags
	diskRuleFlags
	barkLevelFlags

	RunHeader string `name:"run.header" placeholder:"TEXT" help:"Header text of the new run's log (default \"device=<cpu|cuda|mps> lavender=v<version>\")."`
	RunResume bool   `name:"run.resume" help:"Keep appending to the current run instead of starting a new one."`
}

// Run serves until SIGINT or SIGTERM; a second signal exits at once.
func (c *ServeCmd) Run(g *Globals) error {
	return serveUntilSignal(g, c.runtimeFlags, func(ctx context.Context) error { return c.serve(ctx, g, nil, nil) })
}

// validate checks every flag group serve has, before anything starts.
func (c *ServeCmd) validate() error {
	if err := c.validateBark(); err != nil {
		return err
	}
	if err := c.procfsFlags.validate(); err != nil {
		return err
	}
	if err := c.checkKmsgPath(); err != nil {
		return err
	}
	if err := c.validateRunlog(); err != nil {
		return err
	}
	if _, err := c.rules(); err != nil {
		return err
	}
	if _, err := c.paths(); err != nil {
		return err
	}
	if _, err := c.levels(); err != nil {
		return err
	}
	_, err := c.diskRule(c.WatchdogRepeat, c.WatchdogInterval)
	return err
}

// serve runs until ctx ends: it binds the listeners, opens the exporter and
// the bridge, builds the watchdog, opens the run, registers the pages, and
// serves, recording RUN stop at the end. Tests pass their own context and
// learn the bound address through onListen and readiness through onReady.
func (c *ServeCmd) serve(ctx context.Context, g *Globals, onListen func([]net.Addr), onReady func()) error {
	if err := c.validate(); err != nil {
		return err
	}
	srv, err := newCommandServer(&c.webFlags, c.WebExternalURL, g.Logger, onListen)
	if err != nil {
		return err
	}
	defer srv.close()
	exp, closeExp, err := openExporter(c.procfsFlags, c.runlogFlags, g, srv)
	if err != nil {
		return err
	}
	defer closeExp()
	levels, _ := c.levels() // checked by validate
	bridge, stopReload, err := openBridge(&c.barkFlags, levels, c.runlogFlags, g, srv)
	if err != nil {
		return err
	}
	defer stopReload()
	stopStorm := runBridge(ctx, bridge.delivery, c.BarkTimeout+webhookMargin)
	defer stopStorm()
	klog := c.openKernelLog(g.Logger, srv.reg)
	defer klog.close()
	guard, err := c.openDiskGuard(exp, g, srv.reg)
	if err != nil {
		return err
	}
	wd, history, err := c.openWatchdog(exp, bridge.watchdog, klog, guard, g, srv)
	if err != nil {
		return err
	}
	klog.handlers = append(klog.handlers, watchFaults(exp, wd, g.Clock))

	c.openRun(exp, g)
	exp.Register(srv.mux)
	bridge.register(srv.mux)
	page := c.statusPage(wd, bridge.delivery, history)
	page.KernelLog = klog.status
	page.Disks = guard.Latest
	page.DiskMinFree, _ = watchdog.ParseMinFree(c.WatchdogDiskMinFree) // checked by validate
	if err := registerStatusPage(srv.mux, exp, page); err != nil {
		return err
	}

	err = c.serveWatched(ctx, srv, wd, klog, guard, g, func() {
		g.Logger.Info("lavender serve ready", "version", version.Info(), "targets", len(bridge.delivery.Targets()),
			"watchdog_interval", c.WatchdogInterval, "runlog_dir", c.Dir)
		if onReady != nil {
			onReady()
		}
	})
	stopStorm() // held alerts go out, with their BARK line, before RUN stop
	if logErr := exp.AppendToRun(runlog.RunStop); logErr != nil {
		g.Logger.Error("run log: RUN stop not written", "err", logErr)
	}
	return err
}

// openWatchdog builds the one sampler that feeds the status page's history
// and, when on, the watchdog's rules, so the page costs no reads of its
// own.
func (c *ServeCmd) openWatchdog(exp *phaseserver.Server, push watchdog.Pusher, klog *kernelLog, guard *diskguard.Guard, g *Globals, srv *commandServer) (*watchdog.Watchdog, *watchdog.History, error) {
	history := watchdog.NewHistory(c.HistoryStep)
	disk, err := c.diskRule(c.WatchdogRepeat, c.WatchdogInterval)
	if err != nil {
		return nil, nil, err
	}
	wd, err := c.newWatchdog(watchdog.WithDisks(hostReader(c.ProcFS, klog, exp), guard.Latest), history, push, g.Logger, srv.reg, g.Clock, disk)
	if err != nil {
		return nil, nil, err
	}
	return wd, history, nil
}

// openRun starts a new run, or with --run.resume records that the process
// came back to the current one. A full or read-only logs dir loses the
// record, never the pushes: serve starts anyway, and later writes are
// counted in lavender_runlog_write_errors_total.
func (c *ServeCmd) openRun(exp *phaseserver.Server, g *Globals) {
	device := exporter.Device()
	if run, _ := exp.Snapshot(); c.RunResume && run != nil {
		// Entries after the last RUN stop must say the process came back.
		if err := exp.AppendToRun(runlog.RunResume + "  device=" + device); err != nil {
			g.Logger.Error("run log: RUN resume not written", "err", err)
		}
		return
	}
	header := c.RunHeader
	if header == "" {
		header = fmt.Sprintf("device=%s lavender=v%s", device, version.Version)
	}
	if _, err := exp.StartRun(header, runlog.RunStart+"  device="+device); err != nil {
		g.Logger.Error("run log not started; serving anyway", "err", err)
	}
}

// statusPage is what serve's status page shows beyond the exporter: the
// watchdog's history and rule states, the bridge's status, and the
// thresholds in force (the watchdog's when it is on, else the bridge's).
func (c *ServeCmd) statusPage(wd *watchdog.Watchdog, bridge *delivery.Pipeline, history *watchdog.History) statuspage.Config {
	threshold, pressureThreshold := c.BarkThreshold, watchdog.DefaultPressureThreshold
	if c.enabled() {
		threshold = c.WatchdogThreshold
		if c.WatchdogPressureThreshold > 0 {
			pressureThreshold = c.WatchdogPressureThreshold
		}
	}
	return statuspage.Config{
		History:           history,
		Rules:             wd.State,
		Bark:              bridge.Status,
		Threshold:         threshold,
		PressureThreshold: pressureThreshold,
		// The page's stalled mark and the stalled push agree: 0 turns
		// both off.
		StallAfter: c.PhaseStallAfter,
	}
}

// serveWatched serves HTTP and runs the watchdog until ctx ends. The first
// poll comes before ready, so a host that is already paging gets its push
// at once, and the OOM rule has its baseline: kills from before the start
// never push. ready is called once the command is ready.
func (c *ServeCmd) serveWatched(ctx context.Context, srv *commandServer, wd *watchdog.Watchdog, klog *kernelLog, guard *diskguard.Guard, g *Globals, ready func()) error {
	served := make(chan error, 1)
	go func() {
		// In-flight webhooks wait on Bark for at most the timeout: let them
		// finish so a push Bark accepted is answered 200, not retried.
		served <- srv.serve(ctx, &c.webFlags, c.BarkTimeout+webhookMargin, g.Logger)
	}()
	// The disks are read apart from the watchdog's poll, which takes the
	// guard's last readings: a hung filesystem never delays a push.
	diskInterval := c.HistoryStep
	if c.enabled() {
		diskInterval = c.WatchdogInterval
	}
	diskPolls := guard.Start(ctx, diskInterval)
	defer diskPolls.Wait()
	wd.Poll(ctx)
	diskPolls.AwaitFirst(ctx)
	var background sync.WaitGroup
	background.Go(func() { wd.Run(ctx) })
	background.Go(func() { klog.run(ctx, g.Logger) })
	srv.ready.Set()
	ready()
	err := <-served
	background.Wait()
	return err
}
