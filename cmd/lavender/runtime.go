package main

import (
	"fmt"
	"log/slog"
	"runtime"
)

// runtimeFlags are the Go runtime settings of the long-running commands.
//
// GOMAXPROCS defaults to 1, as node_exporter's --runtime.gomaxprocs does:
// lavender's work is a few hundred microseconds per request, and with more
// Ps the scheduler wakes idle threads that spin for work on every request.
// On a 2-CPU VM that doubled the CPU per scrape and took it from the load
// generator (docs/benchmarks.md); on a 64-core training box it would also
// spread GC workers over cores the training run wants.
type runtimeFlags struct {
	GoMaxProcs int `name:"runtime.gomaxprocs" default:"1" env:"LAVENDER_RUNTIME_GOMAXPROCS,GOMAXPROCS" help:"Number of CPUs Go may run lavender's code on at once (GOMAXPROCS); 0 keeps Go's default of one per CPU."`
}

// setGOMAXPROCS is runtime.GOMAXPROCS; the command tests replace it so
// that starting a command does not change their own process.
var setGOMAXPROCS = runtime.GOMAXPROCS

func (f runtimeFlags) apply(logger *slog.Logger) error {
	if f.GoMaxProcs < 0 {
		return fmt.Errorf("--runtime.gomaxprocs must be 0 (one per CPU) or more, not %d", f.GoMaxProcs)
	}
	if f.GoMaxProcs > 0 {
		setGOMAXPROCS(f.GoMaxProcs)
	}
	logger.Debug("Go runtime", "GOMAXPROCS", setGOMAXPROCS(0))
	return nil
}
