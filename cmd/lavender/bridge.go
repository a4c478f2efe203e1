package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/version"

	"lavender/bark"
	"lavender/cmd/lavender/internal/hangup"
	"lavender/delivery"
	"lavender/runlog"
	"lavender/watchpush"
	"lavender/webhook"
	"lavender/webserve"
)

// barkDirFlags locate the Bark targets; every Bark command has them.
type barkDirFlags struct {
	BarkConfigDir string `name:"bark.config-dir" default:"${bark_config_dir}" type:"path" help:"Directory whose *.bark.env files hold the Bark URL templates, one a line, $0 where the message goes."`
}

// barkTargetFlags locate and time the Bark targets, for commands that push.
type barkTargetFlags struct {
	barkDirFlags
	BarkTimeout time.Duration `name:"bark.timeout" default:"${bark_timeout}" help:"Timeout of each Bark push; also bounds a webhook's answer."`
}

// barkFlags are the bridge's flags. lavender serve embeds them too, so the
// webhook behaves the same under either command.
type barkFlags struct {
	barkTargetFlags
	BarkPrefix          string        `name:"bark.prefix" default:"${bark_prefix}" help:"Text that starts every push."`
	BarkThreshold       float64       `name:"bark.threshold" default:"${bark_threshold}" help:"Swap used ratio [0-1] under which a firing swap alert is not pushed (logged instead). 0: none, the alert rule's threshold decides."`
	BarkSwapAlertname   string        `name:"bark.swap-alertname" default:"${bark_swap_alertname}" help:"Alert name of the swap alert."`
	BarkOnlySwap        bool          `name:"bark.only-swap" help:"Push the swap alert only, not other alerts."`
	BarkSendResolved    bool          `name:"bark.send-resolved" help:"Push resolved alerts too."`
	BarkDedupWindow     time.Duration `name:"bark.dedup-window" default:"${bark_dedup_window}" help:"How long a push a target accepted is remembered, so Alertmanager's retries and HA copies do not repeat it."`
	WebhookMaxBytes     int64         `name:"webhook.max-bytes" default:"${webhook_max_bytes}" help:"Largest webhook body accepted; larger ones get 413."`
	BarkMaxPerMinute    int           `name:"bark.max-per-minute" default:"${bark_max_per_minute}" help:"Pushes one target (phone) gets in any 60 s; alerts past it are held and go out as one summary push when the minute ends. 0 turns storm control off."`
	BarkDeleteOnResolve bool          `name:"bark.delete-on-resolve" help:"Delete an incident's notification (Bark delete=1) when it resolves, instead of replacing it with the resolved text. Off: deletes are unreliable on iOS (Bark #297)."`
	WebExternalURL      string        `name:"web.external-url" help:"URL under which lavender is reached (as Prometheus' flag): tapping a push opens it."`
}

// webhookMargin is what a webhook's answer may take beyond the Bark
// timeout: decoding, the run log, and writing the answer.
const webhookMargin = 2 * time.Second

// validateTimeout checks --bark.timeout, for every command that pushes.
func (f *barkTargetFlags) validateTimeout() error {
	if f.BarkTimeout <= 0 {
		return fmt.Errorf("--bark.timeout must be positive, not %s", f.BarkTimeout)
	}
	return nil
}

// barkFlagOf names the flag of each delivery.Config and webhook.Config
// field that their Check can refuse.
var barkFlagOf = map[string]string{
	"Timeout":      "--bark.timeout",
	"Threshold":    "--bark.threshold",
	"DedupWindow":  "--bark.dedup-window",
	"MaxBodyBytes": "--webhook.max-bytes",
	"MaxPerMinute": "--bark.max-per-minute",
	"ExternalURL":  "--web.external-url",
}

// validateBark is the bridge's own check, naming the flags, and the room
// a webhook's answer needs under the server's write timeout.
func (f *barkFlags) validateBark() error {
	err := f.deliveryConfig(runlog.Options{}).Check()
	if err == nil {
		err = f.webhookConfig().Check()
	}
	var fe *delivery.FieldError
	if errors.As(err, &fe) && barkFlagOf[fe.Field] != "" {
		return fmt.Errorf("%s %s", barkFlagOf[fe.Field], fe.Problem)
	}
	if err != nil {
		return err
	}
	if f.BarkTimeout+webhookMargin > servingTimeouts.Write {
		return fmt.Errorf("--bark.timeout %s leaves no room under the server's %s write timeout; use at most %s",
			f.BarkTimeout, servingTimeouts.Write, servingTimeouts.Write-webhookMargin)
	}
	return nil
}

// deliveryConfig is the delivery pipeline's configuration from the flags;
// rl is where the BARK lines go.
func (f *barkFlags) deliveryConfig(rl runlog.Options) delivery.Config {
	return delivery.Config{
		ConfigDir:       f.BarkConfigDir,
		Timeout:         f.BarkTimeout,
		Prefix:          f.BarkPrefix,
		DedupWindow:     f.BarkDedupWindow,
		Runlog:          rl,
		MaxPerMinute:    f.BarkMaxPerMinute,
		DeleteOnResolve: f.BarkDeleteOnResolve,
		ExternalURL:     f.WebExternalURL,
		StateFile:       filepath.Join(logsDir(rl.Dir), delivery.StateFileName),
	}
}

// webhookConfig is the webhook's configuration from the flags.
func (f *barkFlags) webhookConfig() webhook.Config {
	return webhook.Config{
		Timeout:       f.BarkTimeout,
		Prefix:        f.BarkPrefix,
		Threshold:     f.BarkThreshold,
		SwapAlertname: f.BarkSwapAlertname,
		OnlySwap:      f.BarkOnlySwap,
		SendResolved:  f.BarkSendResolved,
		MaxBodyBytes:  f.WebhookMaxBytes,
	}
}

// logsDir is the run-log dir the flags name, runlog's default for "".
func logsDir(dir string) string {
	if dir == "" {
		return runlog.DefaultDir
	}
	return dir
}

// BridgeCmd serves the Alertmanager webhook that pushes to Bark.
type BridgeCmd struct {
	webFlags
	runtimeFlags
	runlogFlags
	barkFlags
}

func (c *BridgeCmd) Run(g *Globals) error {
	return serveUntilSignal(g, c.runtimeFlags, func(ctx context.Context) error { return c.serve(ctx, g, nil) })
}

// serve runs the bridge until ctx ends; tests pass their own context and
// learn the bound address through onListen.
func (c *BridgeCmd) serve(ctx context.Context, g *Globals, onListen func([]net.Addr)) error {
	if err := c.validateBark(); err != nil {
		return err
	}
	if err := c.validateRunlog(); err != nil {
		return err
	}
	srv, err := newCommandServer(&c.webFlags, c.WebExternalURL, g.Logger, onListen)
	if err != nil {
		return err
	}
	defer srv.close()
	bridge, stopReload, err := openBridge(&c.barkFlags, nil, c.runlogFlags, g, srv)
	if err != nil {
		return err
	}
	defer stopReload()
	stopStorm := runBridge(ctx, bridge.delivery, c.BarkTimeout+webhookMargin)
	defer stopStorm()
	bridge.register(srv.mux)
	if err := webserve.AddLanding(srv.mux, "Alertmanager webhook to silent Bark pushes, recorded in the run log.", "/metrics"); err != nil {
		return err
	}
	srv.ready.Set()
	g.Logger.Info("starting lavender bridge", "version", version.Info(), "bark_config_dir", c.BarkConfigDir,
		"targets", len(bridge.delivery.Targets()), "runlog_dir", c.Dir)
	// In-flight webhooks wait on Bark for at most the timeout: let them
	// finish so a push Bark accepted is answered 200, not retried.
	return srv.serve(ctx, &c.webFlags, c.BarkTimeout+webhookMargin, g.Logger)
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

// openBridge builds the pushing for bridge and serve, reloading its
// targets on SIGHUP until stopReload is called.
func openBridge(f *barkFlags, levels watchpush.Levels, r runlogFlags, g *Globals, srv *commandServer) (p pushing, stopReload func(), err error) {
	cfg := f.deliveryConfig(r.logged(g))
	cfg.WriteErrors = srv.writeErrors.WithLabelValues("bark")
	p.delivery, err = delivery.New(cfg, g.Logger, srv.reg)
	var dirErr *bark.ConfigDirError
	if errors.As(err, &dirErr) {
		return p, nil, fmt.Errorf("--bark.config-dir: %w", errors.Unwrap(dirErr))
	}
	if err != nil {
		return p, nil, err
	}
	if p.webhook, err = webhook.New(f.webhookConfig(), p.delivery, g.Logger, srv.reg); err != nil {
		p.delivery.Close()
		return p, nil, err
	}
	p.watchdog = watchpush.New(watchpush.Config{Prefix: f.BarkPrefix, Hostname: hostname(), Levels: levels}, p.delivery)
	return p, reloadOnSIGHUP(p.delivery, g.Logger), nil
}

// runBridge runs the bridge's storm-control summaries until ctx ends or
// the returned stop is called. Stop waits for the loop to end, then sends
// what storm control still holds, within grace: Alertmanager was answered
// 200 for those alerts and will not send them again for hours. Call it
// once the webhook takes no more requests; calls after the first do
// nothing.
func runBridge(ctx context.Context, b *delivery.Pipeline, grace time.Duration) (stop func()) {
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

// hostname names this machine in the watchdog's pushes (their Bark group
// and part of their id); "" when the OS will not say.
func hostname() string {
	h, _ := os.Hostname()
	return h
}

// reloadOnSIGHUP re-reads the Bark targets on every SIGHUP until the
// returned stop is called. A bad config is logged and the old one kept.
func reloadOnSIGHUP(b *delivery.Pipeline, logger *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if hangup.Arrived() {
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
					logger.Error("[bark] reload on SIGHUP failed; keeping the targets in use", "err", err)
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
