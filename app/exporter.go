package app

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"

	"github.com/lavender-ml/lavender/exporter"
	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/phaseserver"
	"github.com/lavender-ml/lavender/statuspage"
	"github.com/lavender-ml/lavender/watchdog"
)

// ExporterOptions are lavender exporter's.
type ExporterOptions struct {
	Web    WebOptions
	Runlog RunlogOptions
	Host   HostOptions
}

// RunExporter serves the host's and the phases' metrics, the heartbeat API
// and the status page until ctx ends.
func RunExporter(ctx context.Context, o ExporterOptions, env Env) error {
	srv, err := newCommandServer(o.Web, env.Logger, env.OnListen)
	if err != nil {
		return err
	}
	defer srv.close()
	exp, closeExp, err := openPhaseServer(o.Host, o.Runlog, env, srv)
	if err != nil {
		return err
	}
	defer closeExp()
	exp.Register(srv.mux)
	klog := openKernelLog(o.Host.KmsgPath, env.Logger, srv.reg, nil, kmsg.From{})
	defer klog.close()
	go klog.run(ctx, env.Logger)
	gpus, err := openGPUs(o.Host.GPU, env, srv.reg)
	if err != nil {
		return err
	}
	defer gpus.close()
	if err := srv.reg.Register(newPhaseGPUCollector(o.Host.ProcFS, exp, gpus)); err != nil {
		return err
	}
	guard, err := openDiskGuard(o.Host.DiskPaths, exp, env, srv.reg)
	if err != nil {
		return err
	}
	diskPolls := guard.Start(ctx, o.Host.HistoryStep)
	defer diskPolls.Wait()
	// The status page's history, sampled as serve's watchdog does when
	// it is off: no rules, no watchdog metrics.
	history := watchdog.NewHistory(o.Host.HistoryStep)
	sampler, err := watchdog.New(watchdog.Config{Interval: history.Step(), Read: hostReader(o.Host.ProcFS, nil, exp, gpus), History: history})
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
		GPUs: gpus.snapshot(), GPUsOff: gpus.off,
	}); err != nil {
		return err
	}
	diskPolls.AwaitFirst(ctx)
	srv.ready.Set()
	env.Logger.Info("starting lavender exporter", "version", version.Info(), "procfs", o.Host.ProcFS, "runlog_dir", o.Runlog.Dir)
	if env.OnReady != nil {
		env.OnReady()
	}
	return srv.serve(ctx, ShutdownGrace, env.Logger)
}

// openPhaseServer builds the phase server for exporter and serve and
// registers its metrics and the swap collector's; close saves the phase
// table's unsaved heartbeats at shutdown.
func openPhaseServer(h HostOptions, rl RunlogOptions, env Env, srv *commandServer) (exp *phaseserver.Server, close func(), err error) {
	cfg := phaseserver.Config{ProcFS: h.ProcFS, Runlog: rl.plain(), WriteErrors: srv.writeErrors.WithLabelValues("exporter"), Clock: env.Clock}
	exp = phaseserver.New(cfg, env.Logger)
	for _, c := range []prometheus.Collector{exporter.NewSwapCollector(h.ProcFS, 0, env.Logger), exp} {
		if err := srv.reg.Register(c); err != nil {
			return nil, nil, fmt.Errorf("register collector: %w", err)
		}
	}
	return exp, func() {
		if err := exp.Close(); err != nil {
			env.Logger.Error("phase table not saved at shutdown", "err", err)
		}
	}, nil
}
