package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/notify"
	"github.com/lavender-ml/lavender/pushtext"

	"github.com/alecthomas/kong"
)

// BarkCmd keeps the first spellings, `bark send` and `bark check`, of the
// channel-neutral `send` and `check`.
type BarkCmd struct {
	Send  SendCmd  `cmd:"" help:"Same as lavender send: push a message to every target (Bark and ntfy) now."`
	Check CheckCmd `cmd:"" help:"Same as lavender check: validate the *.bark.env and *.ntfy.env files."`
}

// SendCmd pushes one message, as given, to every target of every channel.
type SendCmd struct {
	barkTargetFlags
	Test    bool     `name:"test" env:"-" help:"Send a test push naming each target's encryption, e.g. \"[lavender-2] test push (aes-256-gcm) …\", as long as the longest push: \"Decryption Failed\" on the phone then means the key (or, for GCM, the app's version) does not match."`
	Message []string `arg:"" optional:"" help:"Words of the message; joined with spaces."`

	command string // as typed, for errors: "send" or "bark send"
}

func (c *SendCmd) Run(ctx *kong.Context, g *Globals) error {
	c.command = commandName(ctx, "send")
	sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.send(sctx, g)
}

// commandName is the command as typed, which starts every error of it:
// "send", or "bark send" for the first spelling; def when kong did not
// run it.
func commandName(ctx *kong.Context, def string) string {
	if ctx == nil || ctx.Selected() == nil {
		return def
	}
	return ctx.Selected().Path()
}

func (c *SendCmd) send(ctx context.Context, g *Globals) error {
	name := cmp.Or(c.command, "send")
	msg := strings.TrimSpace(strings.Join(c.Message, " "))
	switch {
	case c.Test && msg != "":
		return fmt.Errorf("%s: --test sends its own text; give no message with it", name)
	case !c.Test && msg == "":
		return fmt.Errorf("%s: the message is empty (or use --test)", name)
	}
	if err := c.validateTimeout(); err != nil {
		return err
	}
	res, err := delivery.LoadTargets(c.BarkConfigDir, nil)
	for _, w := range res.Warnings {
		g.Logger.Warn("[push] config file readable by others", "warning", w)
	}
	var dirErr *bark.ConfigDirError
	if errors.As(err, &dirErr) {
		return fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case err != nil && len(res.Notifiers) == 0:
		// Every line is bad (an example copied, its placeholder key still
		// in place): say which and why, not that there is no file.
		return fmt.Errorf("%s: no usable target: %w", name, err)
	case err != nil:
		g.Logger.Error("[push] bad lines in the target files; sending to the good targets", "err", err, "good_targets", len(res.Notifiers))
	case len(res.Notifiers) == 0:
		return fmt.Errorf("%s: no targets (*%s files) in %s", name, strings.Join(delivery.ConfigSuffixes, " or *"), c.BarkConfigDir)
	}
	results := delivery.SendEach(ctx, res.Notifiers, c.BarkTimeout, func(n notify.Notifier) notify.Message {
		text := msg
		if c.Test {
			text = pushtext.WithPrefix(pushtext.DefaultPrefix, pushtext.SelfTest(delivery.Encryption(n)).Body)
		}
		return notify.Message{Text: text, Tags: pushtext.SelfTestTags}
	})
	return reportSent(g, name, results)
}

// reportSent prints one line per target on stdout and, for each failure,
// the predecessor's "[bark] <file> failed: <ErrorClass>" on stderr.
func reportSent(g *Globals, name string, results []delivery.Result) error {
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
			fmt.Fprintln(g.Stderr, "[bark] "+r.String())
			var pe *notify.Error
			if errors.As(r.Err, &pe) && pe.Detail != "" {
				g.Logger.Debug("push failure detail", "target", r.Target, "detail", pe.Detail)
			}
		}
		if _, err := fmt.Fprintln(g.Stdout, r.Explain()); err != nil {
			return err
		}
	}
	if failed == len(results) {
		return fmt.Errorf("%s: every target failed (%d of %d)", name, failed, len(results))
	}
	return nil
}

// CheckCmd validates the targets of every channel; it never sends.
type CheckCmd struct {
	barkDirFlags
}

func (c *CheckCmd) Run(ctx *kong.Context, g *Globals) error {
	name := commandName(ctx, "check")
	res, err := delivery.LoadTargets(c.BarkConfigDir, nil)
	for _, w := range res.Warnings {
		fmt.Fprintln(g.Stderr, "warning:", w)
	}
	var dirErr *bark.ConfigDirError
	if errors.As(err, &dirErr) {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, line := range res.Report {
		if _, err := fmt.Fprintln(g.Stdout, line); err != nil {
			return err
		}
	}
	summary := targetCount(res.Notifiers) + " in " + plural(res.Files, "file")
	if res.Bad > 0 {
		summary += ", " + plural(res.Bad, "bad line")
	}
	if len(res.Notifiers)+res.Bad > 0 {
		if _, err := fmt.Fprintln(g.Stdout, summary); err != nil {
			return err
		}
	}
	switch {
	case err != nil && res.Bad > 0:
		// The report above named each bad line: say only that it failed.
		return fmt.Errorf("%s: %s", name, plural(res.Bad, "bad line"))
	case err != nil:
		return fmt.Errorf("%s: %w", name, err)
	case len(res.Notifiers) == 0:
		return fmt.Errorf("%s: no targets (*%s files) in %s", name, strings.Join(delivery.ConfigSuffixes, " or *"), c.BarkConfigDir)
	}
	return nil
}

// targetCount is "2 Bark targets" where every target is Bark's, else
// "3 targets (2 Bark, 1 ntfy)".
func targetCount(ns []notify.Notifier) string {
	var b, n int
	for _, t := range ns {
		if t.Channel() == bark.ChannelName {
			b++
		} else {
			n++
		}
	}
	if n == 0 {
		return plural(b, "Bark target")
	}
	return fmt.Sprintf("%s (%d Bark, %d ntfy)", plural(b+n, "target"), b, n)
}

// plural is "1 file", "2 files".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
