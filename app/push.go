package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/version"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/watchpush"
	"github.com/lavender-ml/lavender/webhook"
	"github.com/lavender-ml/lavender/webserve"
)

// WebhookMargin is what a webhook's answer may take beyond the push
// timeout: decoding, the run log, and writing the answer.
const WebhookMargin = 2 * time.Second

// PushOptions configure every push's way out: the delivery pipeline, the
// webhook and the watchdog's pushes. Delivery.Runlog, StateFile and
// WriteErrors are the command's to fill.
type PushOptions struct {
	Delivery delivery.Config
	Webhook  webhook.Config
	Levels   watchpush.Levels // the watchdog's pushes' levels; nil: all passive
}

// pushing is every push's way out, for bridge and serve: the delivery
// pipeline, the webhook that hands it Alertmanager's alerts, and the
// watchdog's pusher.
type pushing struct {
	delivery *delivery.Pipeline
	webhook  *webhook.Handler
	watchdog *watchpush.Pusher
}

// register adds the webhook and the reload endpoint to mux.
func (p pushing) register(mux *http.ServeMux) {
	p.webhook.Register(mux)
	p.delivery.Register(mux)
}

// openPushing builds the pushing for bridge and serve, reloading its
// targets on SIGHUP until stopReload is called.
func openPushing(o PushOptions, rl RunlogOptions, env Env, srv *commandServer) (p pushing, stopReload func(), err error) {
	cfg := o.Delivery
	cfg.Runlog = rl.logged(env.Logger)
	cfg.StateFile = filepath.Join(rl.LogsDir(), delivery.StateFileName)
	cfg.WriteErrors = srv.writeErrors.WithLabelValues("bark")
	p.delivery, err = delivery.New(cfg, env.Logger, srv.reg)
	var dirErr *bark.ConfigDirError
	if errors.As(err, &dirErr) {
		return p, nil, fmt.Errorf("--bark.config-dir: %w", errors.Unwrap(dirErr))
	}
	if err != nil {
		return p, nil, err
	}
	if p.webhook, err = webhook.New(o.Webhook, p.delivery, env.Logger, srv.reg); err != nil {
		p.delivery.Close()
		return p, nil, err
	}
	p.watchdog = watchpush.New(watchpush.Config{Prefix: o.Webhook.Prefix, Hostname: Hostname(), Levels: o.Levels}, p.delivery)
	return p, reloadOnSIGHUP(p.delivery, env), nil
}

// runDelivery runs the pipeline's storm-control summaries until ctx ends
// or the returned stop is called. Stop waits for the loop to end, then
// sends what storm control still holds, within grace: Alertmanager was
// answered 200 for those alerts and will not send them again for hours.
// Call it once the webhook takes no more requests; calls after the first
// do nothing.
func runDelivery(ctx context.Context, b *delivery.Pipeline, grace time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	return sync.OnceFunc(func() {
		cancel()
		<-done
		flushCtx, cancelFlush := context.WithTimeout(context.Background(), grace)
		defer cancelFlush()
		b.Flush(flushCtx)
		b.Close()
	})
}

// reloadOnSIGHUP re-reads the targets on every SIGHUP until the returned
// stop is called. A bad config is logged and the old one kept.
func reloadOnSIGHUP(b *delivery.Pipeline, env Env) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if env.HangupArrived != nil && env.HangupArrived() {
		// A SIGHUP came while the command started: the targets may have
		// been read before the change it announces.
		hup <- syscall.SIGHUP
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				if err := b.Reload(); err != nil {
					env.Logger.Error("[bark] reload on SIGHUP failed; keeping the targets in use", "err", err)
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

// BridgeOptions are lavender bridge's.
type BridgeOptions struct {
	Web    WebOptions
	Runlog RunlogOptions
	Push   PushOptions
}

// RunBridge serves the Alertmanager webhook until ctx ends.
func RunBridge(ctx context.Context, o BridgeOptions, env Env) error {
	srv, err := newCommandServer(o.Web, env.Logger, env.OnListen)
	if err != nil {
		return err
	}
	defer srv.close()
	p, stopReload, err := openPushing(o.Push, o.Runlog, env, srv)
	if err != nil {
		return err
	}
	defer stopReload()
	timeout := o.Push.Delivery.Timeout
	stopStorm := runDelivery(ctx, p.delivery, timeout+WebhookMargin)
	defer stopStorm()
	p.register(srv.mux)
	if err := webserve.AddLanding(srv.mux, "Alertmanager webhook to silent Bark pushes, recorded in the run log.", "/metrics"); err != nil {
		return err
	}
	srv.ready.Set()
	env.Logger.Info("starting lavender bridge", "version", version.Info(), "bark_config_dir", o.Push.Delivery.ConfigDir,
		"targets", len(p.delivery.Targets()), "runlog_dir", o.Runlog.Dir)
	if env.OnReady != nil {
		env.OnReady()
	}
	// In-flight webhooks wait on the channels for at most the timeout: let
	// them finish so a push a service accepted is answered 200, not retried.
	return srv.serve(ctx, timeout+WebhookMargin, env.Logger)
}
