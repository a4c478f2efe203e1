package main

import (
	"context"
	"net"
	"time"

	"github.com/lavender-ml/lavender/app"
)

// ExporterCmd serves swap and phase metrics and the heartbeat API.
type ExporterCmd struct {
	runlogFlags
	webFlags
	runtimeFlags
	procfsFlags
	diskFlags
	kernelLogFlags
	gpuFlags
}

// procfsFlags point the swap readers at another procfs, as node_exporter's
// --path.procfs does, for containers and for tests.
type procfsFlags struct {
	ProcFS string `name:"path.procfs" default:"${procfs}" help:"procfs mountpoint to read meminfo and vmstat from."`
	// HistoryStep sets the status page's swap chart: 360 points, one per step.
	HistoryStep time.Duration `name:"status.history-step" default:"${history_step}" help:"Time between points of the status page's swap chart, which keeps 360 of them (10s: the last hour)."`
}

func (c *ExporterCmd) Run(g *Globals) error {
	return serveUntilSignal(g, c.runtimeFlags, func(ctx context.Context) error { return c.serve(ctx, g, nil) })
}

// serve runs the exporter until ctx ends; tests call it with their own
// context and learn the bound address through onListen.
func (c *ExporterCmd) serve(ctx context.Context, g *Globals, onListen func([]net.Addr)) error {
	o := app.ExporterOptions{Web: c.webOptions(""), Runlog: c.runlogOptions(), Host: hostOptions(c.procfsFlags, c.kernelLogFlags, c.gpuFlags)}
	if err := o.Check(); err != nil {
		return err
	}
	var err error
	if o.Host.DiskPaths, err = c.paths(); err != nil {
		return err
	}
	return app.RunExporter(ctx, o, g.env(onListen, nil))
}
