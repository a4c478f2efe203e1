package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/lavender-ml/lavender/app"
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
}

func (c *SendCmd) Run(ctx *kong.Context, g *Globals) error {
	sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return app.Send(sctx, app.SendOptions{
		Command: commandName(ctx, "send"), ConfigDir: c.BarkConfigDir, Timeout: c.BarkTimeout,
		Test: c.Test, Message: strings.Join(c.Message, " "),
	}, app.Env{Logger: g.Logger}, g.Stdout, g.Stderr)
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

// CheckCmd validates the targets of every channel; it never sends.
type CheckCmd struct {
	barkDirFlags
}

func (c *CheckCmd) Run(ctx *kong.Context, g *Globals) error {
	return app.Check(commandName(ctx, "check"), c.BarkConfigDir, g.Stdout, g.Stderr)
}
