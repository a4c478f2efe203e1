package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// runtimeFlags are the Go runtime settings of the long-running commands.
// Both defaults come from Prometheus projects; the measurements behind them
// are in docs/benchmarks.md, "Runtime defaults"
// (docs/benchmarks.md#runtime-defaults).
//
// GOMAXPROCS defaults to 1, as node_exporter's --runtime.gomaxprocs does:
// lavender's work is short per request, and with more Ps the scheduler
// wakes idle threads that spin for work on every request; on a many-core
// training box more Ps would also spread GC workers over cores the run
// wants.
//
// GOGC defaults to 75, as the Prometheus server's does since 2.53: the
// live heap is small enough that the heap goal is Go's floor, which GOGC
// scales, and a watchdog for memory pressure should hold little memory.
// A GOGC in the environment is left as the runtime applied it.
type runtimeFlags struct {
	GoMaxProcs int  `name:"runtime.gomaxprocs" default:"1" env:"LAVENDER_RUNTIME_GOMAXPROCS,GOMAXPROCS" help:"Number of CPUs Go may run lavender's code on at once (GOMAXPROCS); 0 keeps Go's default of one per CPU."`
	GoGC       *int `name:"runtime.gogc" placeholder:"${runtime_gogc}" help:"Garbage collector target percentage (GOGC). Default ${runtime_gogc}, or GOGC from the environment when set (GOGC=off turns the collector off)."`
}

const defaultGOGC = 75

// setGOMAXPROCS and setGCPercent are the runtime's; the command tests
// replace them so that starting a command does not change their process.
var (
	setGOMAXPROCS = runtime.GOMAXPROCS
	setGCPercent  = debug.SetGCPercent
)

func (f runtimeFlags) apply(logger *slog.Logger) error {
	if f.GoMaxProcs < 0 {
		return fmt.Errorf("--runtime.gomaxprocs must be 0 (one per CPU) or more, not %d", f.GoMaxProcs)
	}
	if f.GoGC != nil && *f.GoGC < 1 {
		return fmt.Errorf("--runtime.gogc must be at least 1, not %d (GOGC=off in the environment turns the collector off)", *f.GoGC)
	}
	if f.GoMaxProcs > 0 {
		setGOMAXPROCS(f.GoMaxProcs)
	}
	switch {
	case f.GoGC != nil:
		setGCPercent(*f.GoGC)
	case os.Getenv("GOGC") != "":
		// The runtime read it at start.
	default:
		setGCPercent(defaultGOGC)
	}
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(gogc)
	logger.Debug("Go runtime", "GOMAXPROCS", setGOMAXPROCS(0), "GOGC", int64(gogc[0].Value.Uint64())) // -1 is off
	return nil
}
