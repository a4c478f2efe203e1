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
	if _, err := c.paths(); err != nil {
		return err
	}
	if _, err := c.levels(); err != nil {
		return err
	}
	_, err := c.watchdogOptions()
	return err
}

// serve runs until ctx ends; tests pass their own context and learn the
// bound address through onListen and readiness through onReady.
func (c *ServeCmd) serve(ctx context.Context, g *Globals, onListen func([]net.Addr), onReady func()) error {
	if err := c.validate(); err != nil {
		return err
	}
	return app.RunServe(ctx, c.options(g), g.env(onListen, onReady))
}

// options are serve's flags as app takes them; validate has checked them.
func (c *ServeCmd) options(g *Globals) app.ServeOptions {
	levels, _ := c.levels()
	host, _ := c.hostOptions()
	wd, _ := c.watchdogOptions()
	return app.ServeOptions{
		Web:       c.webOptions(c.WebExternalURL),
		Runlog:    c.runlogOptions(),
		Host:      host,
		Push:      c.pushOptions(levels),
		Watchdog:  wd,
		RunHeader: c.RunHeader,
		RunResume: c.RunResume,
	}
}
