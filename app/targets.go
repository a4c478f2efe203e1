package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/notify"
	"github.com/lavender-ml/lavender/pushtext"
)

// SendOptions are `send`'s: one message, as given, to every target of
// every channel, now.
type SendOptions struct {
	Command   string // as typed, "send" or "bark send": every error starts with it
	ConfigDir string // where the *.bark.env and *.ntfy.env files are
	Timeout   time.Duration
	// Test sends the self-test text naming each target's encryption in
	// place of Message.
	Test    bool
	Message string
}

// Send pushes the message through delivery's retry stage and prints one
// line per target on stdout and, for each failure, the predecessor's
// "[bark] <file> failed: <ErrorClass>" on stderr. It fails when every
// target failed, or when there is none, and refuses a timeout that is not
// positive (--bark.timeout) before it reads anything.
func Send(ctx context.Context, o SendOptions, env Env, stdout, stderr io.Writer) error {
	// delivery's own check of the timeout, as serve's and the bridge's.
	if err := flagError(delivery.Config{Timeout: o.Timeout}.Check(), pushFlagOf); err != nil {
		return err
	}
	msg := strings.TrimSpace(o.Message)
	switch {
	case o.Test && msg != "":
		return fmt.Errorf("%s: --test sends its own text; give no message with it", o.Command)
	case !o.Test && msg == "":
		return fmt.Errorf("%s: the message is empty (or use --test)", o.Command)
	}
	res, err := delivery.LoadTargets(o.ConfigDir, nil)
	for _, w := range res.Warnings {
		env.Logger.Warn("[push] target files", "warning", w)
	}
	var dirErr *bark.ConfigDirError
	if errors.As(err, &dirErr) {
		return fmt.Errorf("%s: %w", o.Command, err)
	}
	switch {
	case err != nil && len(res.Notifiers) == 0:
		// Every line is bad (an example copied, its placeholder key still
		// in place): say which and why, not that there is no file.
		return fmt.Errorf("%s: no usable target: %w", o.Command, err)
	case err != nil:
		env.Logger.Error("[push] bad lines in the target files; sending to the good targets", "err", err, "good_targets", len(res.Notifiers))
	case len(res.Notifiers) == 0:
		return noTargets(o.Command, o.ConfigDir)
	}
	results := delivery.SendEach(ctx, res.Notifiers, o.Timeout, func(n notify.Notifier) notify.Message {
		text := msg
		if o.Test {
			text = pushtext.WithPrefix(pushtext.DefaultPrefix, pushtext.SelfTest(delivery.Encryption(n)).Body)
		}
		return notify.Message{Text: text, Tags: pushtext.SelfTestTags}
	})
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
			fmt.Fprintln(stderr, "[bark] "+r.String())
			var pe *notify.Error
			if errors.As(r.Err, &pe) && pe.Detail != "" {
				env.Logger.Debug("push failure detail", "target", r.Target, "detail", pe.Detail)
			}
		}
		if _, err := fmt.Fprintln(stdout, r.Explain()); err != nil {
			return err
		}
	}
	if failed == len(results) {
		return fmt.Errorf("%s: every target failed (%d of %d)", o.Command, failed, len(results))
	}
	return nil
}

// Check validates the target files of every channel, never sending: a
// line per target on stdout, warnings on stderr, and an error naming the
// bad lines or the missing targets.
func Check(command, configDir string, stdout, stderr io.Writer) error {
	res, err := delivery.LoadTargets(configDir, nil)
	for _, w := range res.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	var dirErr *bark.ConfigDirError
	if errors.As(err, &dirErr) {
		return fmt.Errorf("%s: %w", command, err)
	}
	for _, line := range res.Report {
		if _, err := fmt.Fprintln(stdout, line); err != nil {
			return err
		}
	}
	summary := targetCount(res.Notifiers) + " in " + plural(res.Files, "file")
	if res.Bad > 0 {
		summary += ", " + plural(res.Bad, "bad line")
	}
	if len(res.Notifiers)+res.Bad > 0 {
		if _, err := fmt.Fprintln(stdout, summary); err != nil {
			return err
		}
	}
	switch {
	case err != nil && res.Bad > 0:
		// The report above named each bad line: say only that it failed.
		return fmt.Errorf("%s: %s", command, plural(res.Bad, "bad line"))
	case err != nil:
		return fmt.Errorf("%s: %w", command, err)
	case len(res.Notifiers) == 0:
		return noTargets(command, configDir)
	}
	return nil
}

// noTargets is the error of a config dir without a target file of any
// channel.
func noTargets(command, dir string) error {
	return fmt.Errorf("%s: no targets (*%s files) in %s", command, strings.Join(delivery.ConfigSuffixes, " or *"), dir)
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
