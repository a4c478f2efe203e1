package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"

	"lavender/exporter"
	"lavender/phaseserver"
	"lavender/statuspage"
	"lavender/watchdog"
)

// ExporterCmd serves swap and phase metrics and the heartbeat API.
type ExporterCmd struct {
	runlogFlags
	webFlags
	runtimeFlags
	procfsFlags
	diskFlags
	kernelLogFlags
}

// procfsFlags point the swap readers at another procfs, as node_exporter's
// --path.procfs does, for containers and for tests.
type procfsFlags struct {
	ProcFS string `name:"path.procfs" default:"${procfs}" help:"procfs mountpoint to read meminfo and vmstat from."`
	// HistoryStep sets the status page's swap chart: 360 points, one per step.
	HistoryStep time.Duration `name:"status.history-step" default:"${history_step}" help:"Time between points of the status page's swap chart, which keeps 360 of them (10s: the last hour)."`
}

func (f *procfsFlags) validate() error {
	if f.HistoryStep <= 0 {
		return fmt.Errorf("--status.history-step must be positive, not %s", f.HistoryStep)
	}
	return nil
}

func (c *ExporterCmd) Run(g *Globals) error {
	return serveUntilSignal(g, c.runtimeFlags, func(ctx context.Context) error { return c.serve(ctx, g, nil) })
}

// serve runs the exporter until ctx ends; tests call it with their own
// context and learn the bound address through onListen.
func (c *ExporterCmd) serve(ctx context.Context, g *Globals, onListen func([]net.Addr)) error {
	if err := c.validate(); err != nil {
		return err
	}
	if err := c.validateRunlog(); err != nil {
		return err
	}
	if err := c.checkKmsgPath(); err != nil {
		return err
	}
	srv, err := newCommandServer(&c.webFlags, "", g.Logger, onListen)
	if err != nil {
		return err
	}
	defer srv.close()
	exp, closeExp, err := openExporter(c.procfsFlags, c.runlogFlags, g, srv)
	if err != nil {
		return err
	}
	defer closeExp()
	exp.Register(srv.mux)
	klog := c.openKernelLog(g.Logger, srv.reg)
	defer klog.close()
	go klog.run(ctx, g.Logger)
	guard, err := c.openDiskGuard(exp, g, srv.reg)
	if err != nil {
		return err
	}
	diskPolls := guard.Start(ctx, c.HistoryStep)
	defer diskPolls.Wait()
	// The status page's history, sampled as serve's watchdog does when
	// it is off: no rules, no watchdog metrics.
	history := watchdog.NewHistory(c.HistoryStep)
	sampler, err := watchdog.New(watchdog.Config{Interval: history.Step(), Read: hostReader(c.ProcFS, nil, exp), History: history})
	if err != nil {
		return err
	}
	sampler.Poll(ctx)
	go sampler.Run(ctx)
	if err := registerStatusPage(srv.mux, exp, statuspage.Config{
		// exporter pushes nothing; its page marks stalls as serve's
		// stalled rule would at its default.
		History: history, StallAfter: watchdog.DefaultStallAfter, KernelLog: klog.status,
		// exporter has no disk rule; its page marks disks at serve's default floor.
		Disks: guard.Latest, DiskMinFree: watchdog.DefaultMinFree(),
	}); err != nil {
		return err
	}
	diskPolls.AwaitFirst(ctx)
	srv.ready.Set()
	g.Logger.Info("starting lavender exporter", "version", version.Info(), "procfs", c.ProcFS, "runlog_dir", c.Dir)
	return srv.serve(ctx, &c.webFlags, shutdownGrace, g.Logger)
}

// openExporter builds the phase server for exporter and serve and
// registers its metrics and the swap collector's; close saves the phase
// table's unsaved heartbeats at shutdown.
func openExporter(p procfsFlags, r runlogFlags, g *Globals, srv *commandServer) (exp *phaseserver.Server, close func(), err error) {
	cfg := phaseserver.Config{ProcFS: p.ProcFS, Runlog: r.options(), WriteErrors: srv.writeErrors.WithLabelValues("exporter"), Clock: g.Clock}
	exp = phaseserver.New(cfg, g.Logger)
	for _, c := range []prometheus.Collector{exporter.NewSwapCollector(p.ProcFS, 0, g.Logger), exp} {
		if err := srv.reg.Register(c); err != nil {
			return nil, nil, fmt.Errorf("register collector: %w", err)
		}
	}
	return exp, func() {
		if err := exp.Close(); err != nil {
			g.Logger.Error("phase table not saved at shutdown", "err", err)
		}
	}, nil
}

// metricsHandler serves reg the way node_exporter does, with promhttp's own
// request metrics and errors logged rather than failing the scrape.
func metricsHandler(reg *prometheus.Registry, logger *slog.Logger) http.Handler {
	// Sent whole, in two write(2)s rather than a chunk per 4 KiB.
	return exporter.WholeResponse(promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg,
		// node_exporter's --web.max-requests default. A 503 is a failed
		// scrape (up == 0, LavenderDown), so the bound is set for a host
		// that stalls for a moment, not for a steady flood.
		MaxRequestsInFlight: 40,
	})))
}
