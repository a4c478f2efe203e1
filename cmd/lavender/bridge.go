package main

import (
	"context"
	"net"
	"time"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/runlog"
	"github.com/lavender-ml/lavender/watchpush"
	"github.com/lavender-ml/lavender/webhook"
)

// barkDirFlags locate the Bark targets; every Bark command has them.
type barkDirFlags struct {
	BarkConfigDir string `name:"bark.config-dir" default:"${bark_config_dir}" type:"path" help:"Directory of the push targets: *.bark.env files (Bark URL templates, one a line, $0 where the message goes) and *.ntfy.env files (ntfy topic URLs with options)."`
}

// barkTargetFlags locate and time the Bark targets, for commands that push.
type barkTargetFlags struct {
	barkDirFlags
	BarkTimeout time.Duration `name:"bark.timeout" default:"${bark_timeout}" help:"Timeout of each push (Bark or ntfy), its retries included; also bounds a webhook's answer."`
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
	}
}

// pushOptions are the push flags as app takes them.
func (f *barkFlags) pushOptions(levels watchpush.Levels) app.PushOptions {
	return app.PushOptions{Delivery: f.deliveryConfig(runlog.Options{}), Webhook: f.webhookConfig(), Levels: levels}
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
	o := app.BridgeOptions{Web: c.webOptions(c.WebExternalURL), Runlog: c.runlogOptions(), Push: c.pushOptions(nil)}
	if err := o.Check(); err != nil {
		return err
	}
	return app.RunBridge(ctx, o, g.env(onListen, nil))
}
