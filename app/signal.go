package app

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// RunUntilSignal runs a serving command (serve, exporter, bridge) until
// the first SIGINT or SIGTERM ends its context, so that it shuts down
// gracefully; a second signal exits at once.
func RunUntilSignal(logger *slog.Logger, run func(context.Context) error) error {
	ctx, stop := shutdownContext(logger)
	defer stop()
	return run(ctx)
}

// shutdownContext ends at the first SIGINT or SIGTERM; a second one exits
// the process.
func shutdownContext(logger *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		logger.Info("shutting down; a second signal exits at once", "signal", sig.String())
		cancel()
		if sig, ok = <-sigs; ok {
			logger.Warn("second signal, exiting now", "signal", sig.String())
			os.Exit(1)
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(sigs)
		cancel()
	}
}
