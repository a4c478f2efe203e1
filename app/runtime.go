package app

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	"github.com/lavender-ml/lavender/delivery"
)

// RuntimeOptions are the Go runtime settings of the serving commands.
// Both defaults come from Prometheus projects; the measurements behind them
// are in docs/benchmarks.md, "Runtime defaults".
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
type RuntimeOptions struct {
	// GoMaxProcs is GOMAXPROCS; 0 keeps Go's default of one per CPU.
	GoMaxProcs int
	// GoGC is GOGC, at least 1; nil: GOGC from the environment when set
	// (the runtime applied it at start), else DefaultGOGC.
	GoGC *int
}

// DefaultGOGC is GOGC when neither the options nor the environment set it.
const DefaultGOGC = 75

// setGOMAXPROCS and setGCPercent are the runtime's; tests replace them so
// that checking ApplyRuntime does not change their process.
var (
	setGOMAXPROCS = runtime.GOMAXPROCS
	setGCPercent  = debug.SetGCPercent
)

// Check reports, as a *delivery.FieldError naming the field, the first
// value of o out of range, so that a command can name its flag.
func (o RuntimeOptions) Check() error {
	switch {
	case o.GoMaxProcs < 0:
		return &delivery.FieldError{Field: "GoMaxProcs", Problem: fmt.Sprintf("must be 0 (one per CPU) or more, not %d", o.GoMaxProcs)}
	case o.GoGC != nil && *o.GoGC < 1:
		return &delivery.FieldError{Field: "GoGC", Problem: fmt.Sprintf("must be at least 1, not %d (GOGC=off in the environment turns the collector off)", *o.GoGC)}
	}
	return nil
}

// ApplyRuntime sets the process's GOMAXPROCS and GOGC from o and logs
// what the runtime then runs with. Values out of range (Check) are an
// error and change nothing.
func ApplyRuntime(o RuntimeOptions, logger *slog.Logger) error {
	if err := o.Check(); err != nil {
		return err
	}
	if o.GoMaxProcs > 0 {
		setGOMAXPROCS(o.GoMaxProcs)
	}
	switch {
	case o.GoGC != nil:
		setGCPercent(*o.GoGC)
	case os.Getenv("GOGC") != "":
		// The runtime read it at start.
	default:
		setGCPercent(DefaultGOGC)
	}
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(gogc)
	logger.Debug("Go runtime", "GOMAXPROCS", setGOMAXPROCS(0), "GOGC", int64(gogc[0].Value.Uint64())) // -1 is off
	return nil
}
