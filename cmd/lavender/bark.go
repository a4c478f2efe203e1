package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"lavender/bark"
	"lavender/pushtext"
)

// BarkCmd groups the Bark subcommands.
type BarkCmd struct {
	Send  BarkSendCmd  `cmd:"" help:"Push a message to every Bark target now; prints one line per target."`
	Check BarkCheckCmd `cmd:"" help:"Validate the *.bark.env files without sending anything."`
}

// BarkSendCmd pushes one message, as given, to every target.
type BarkSendCmd struct {
	barkTargetFlags
	Test    bool     `name:"test" env:"-" help:"Send a test push naming each target's encryption, e.g. \"[lavender-2] test push (aes-256-gcm) …\", as long as the longest push: \"Decryption Failed\" on the phone then means the key (or, for GCM, the app's version) does not match."`
	Message []string `arg:"" optional:"" help:"Words of the message; joined with spaces."`
}

func (c *BarkSendCmd) Run(g *Globals) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.send(ctx, g)
}

func (c *BarkSendCmd) send(ctx context.Context, g *Globals) error {
	msg := strings.TrimSpace(strings.Join(c.Message, " "))
	switch {
	case c.Test && msg != "":
		return errors.New("bark send: --test sends its own text; give no message with it")
	case !c.Test && msg == "":
		return errors.New("bark send: the message is empty (or use --test)")
	}
	if err := c.validateTimeout(); err != nil {
		return err
	}
	res, err := bark.LoadTargets(c.BarkConfigDir)
	for _, w := range res.Warnings {
		g.Logger.Warn("[bark] config file readable by others", "warning", w)
	}
	var dirErr *bark.ConfigDirError
	if errors.As(err, &dirErr) {
		return fmt.Errorf("bark send: %w", err)
	}
	switch {
	case err != nil && len(res.Targets) == 0:
		// Every line is bad (an example copied, its placeholder key still
		// in place): say which and why, not that there is no file.
		return fmt.Errorf("bark send: no usable Bark target: %w", err)
	case err != nil:
		g.Logger.Error("[bark] bad lines in the Bark config; sending to the good targets", "err", err, "good_targets", len(res.Targets))
	case len(res.Targets) == 0:
		return fmt.Errorf("bark send: no Bark targets (*%s files) in %s", bark.ConfigSuffix, c.BarkConfigDir)
	}
	notifiers := make([]*bark.Notifier, len(res.Targets))
	for i, t := range res.Targets {
		notifiers[i] = bark.New(t, nil, "")
	}
	results := bark.Send(ctx, notifiers, c.BarkTimeout, func(t bark.Target) bark.Push {
		text := msg
		if c.Test {
			text = pushtext.WithPrefix(pushtext.DefaultPrefix, pushtext.SelfTest(t.Encryption()).Body)
		}
		return bark.Push{Text: text}
	})
	return reportSent(g, results)
}

// reportSent prints one line per target on stdout and, for each failure,
// the predecessor's "[bark] <file> failed: <ErrorClass>" on stderr.
func reportSent(g *Globals, results []bark.Result) error {
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
			fmt.Fprintln(g.Stderr, "[bark] "+r.String())
			var pe *bark.PushError
			if errors.As(r.Err, &pe) && pe.Detail != "" {
				g.Logger.Debug("push failure detail", "target", r.Target, "detail", pe.Detail)
			}
		}
		if _, err := fmt.Fprintln(g.Stdout, r.Explain()); err != nil {
			return err
		}
	}
	if failed == len(results) {
		return fmt.Errorf("bark send: every target failed (%d of %d)", failed, len(results))
	}
	return nil
}

// BarkCheckCmd validates the targets; it never contacts Bark.
type BarkCheckCmd struct {
	barkDirFlags
}

func (c *BarkCheckCmd) Run(g *Globals) error {
	res, err := bark.LoadTargets(c.BarkConfigDir)
	for _, w := range res.Warnings {
		fmt.Fprintln(g.Stderr, "warning:", w)
	}
	var dirErr *bark.ConfigDirError
	if errors.As(err, &dirErr) {
		return fmt.Errorf("bark check: %w", err)
	}
	for _, line := range res.Report() {
		if _, err := fmt.Fprintln(g.Stdout, line); err != nil {
			return err
		}
	}
	summary := plural(len(res.Targets), "Bark target") + " in " + plural(len(res.Files), "file")
	if len(res.Bad) > 0 {
		summary += ", " + plural(len(res.Bad), "bad line")
	}
	if len(res.Targets)+len(res.Bad) > 0 {
		if _, err := fmt.Fprintln(g.Stdout, summary); err != nil {
			return err
		}
	}
	switch {
	case err != nil && len(res.Bad) > 0:
		// The report above named each bad line: say only that it failed.
		return fmt.Errorf("bark check: %s", plural(len(res.Bad), "bad line"))
	case err != nil:
		return fmt.Errorf("bark check: %w", err)
	case len(res.Targets) == 0:
		return fmt.Errorf("bark check: no Bark targets (*%s files) in %s", bark.ConfigSuffix, c.BarkConfigDir)
	}
	return nil
}

// plural is "1 file", "2 files".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
