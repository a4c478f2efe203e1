package main

import (
	"context"
	"net"

	"github.com/lavender-ml/lavender/app"
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
	gpuFlags
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

// serve runs until ctx ends; tests pass their own context and learn the
// bound address through onListen and readiness through onReady.
func (c *ServeCmd) serve(ctx context.Context, g *Globals, onListen func([]net.Addr), onReady func()) error {
	o, err := c.options()
	if err != nil {
		return err
	}
	return app.RunServe(ctx, o, g.env(onListen, onReady))
}

// options are serve's flags as app takes them, every one checked before
// anything starts; errors name the flag.
func (c *ServeCmd) options() (app.ServeOptions, error) {
	o := app.ServeOptions{
		Web:       c.webOptions(c.WebExternalURL),
		Runlog:    c.runlogOptions(),
		Host:      hostOptions(c.procfsFlags, c.kernelLogFlags, c.gpuFlags),
		Push:      c.pushOptions(nil),
		RunHeader: c.RunHeader,
		RunResume: c.RunResume,
	}
	if err := o.Check(); err != nil {
		return o, err
	}
	var err error
	if o.Host.DiskPaths, err = c.paths(); err != nil {
		return o, err
	}
	if o.Push.Levels, err = c.levels(); err != nil {
		return o, err
	}
	o.Watchdog, err = c.watchdogOptions()
	return o, err
}
