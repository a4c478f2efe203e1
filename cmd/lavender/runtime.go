package main

import (
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
	o := app.RuntimeOptions{GoMaxProcs: f.GoMaxProcs, GoGC: f.GoGC}
	if err := o.CheckFlags(); err != nil {
		return err
	}
	return applyRuntime(o, logger)
}
