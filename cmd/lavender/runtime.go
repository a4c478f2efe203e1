package main

import (
	"fmt"
	"log/slog"

	"github.com/lavender-ml/lavender/app"
)

// runtimeFlags are the Go runtime settings of the serving commands; their
// defaults and the reasons for them are app.RuntimeOptions'. A GOGC in the
// environment is left as the runtime applied it.
type runtimeFlags struct {
	GoMaxProcs int  `name:"runtime.gomaxprocs" default:"1" env:"LAVENDER_RUNTIME_GOMAXPROCS,GOMAXPROCS" help:"Number of CPUs Go may run lavender's code on at once (GOMAXPROCS); 0 keeps Go's default of one per CPU."`
	GoGC       *int `name:"runtime.gogc" placeholder:"${runtime_gogc}" help:"Garbage collector target percentage (GOGC). Default ${runtime_gogc}, or GOGC from the environment when set (GOGC=off turns the collector off)."`
}

// applyRuntime is app's; the command tests replace it so that starting a
// command does not change their process.
var applyRuntime = app.ApplyRuntime

func (f runtimeFlags) apply(logger *slog.Logger) error {
	if f.GoMaxProcs < 0 {
		return fmt.Errorf("--runtime.gomaxprocs must be 0 (one per CPU) or more, not %d", f.GoMaxProcs)
	}
	if f.GoGC != nil && *f.GoGC < 1 {
		return fmt.Errorf("--runtime.gogc must be at least 1, not %d (GOGC=off in the environment turns the collector off)", *f.GoGC)
	}
	return applyRuntime(app.RuntimeOptions{GoMaxProcs: f.GoMaxProcs, GoGC: f.GoGC}, logger)
}
