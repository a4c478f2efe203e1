package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/heartbeat"
	"github.com/lavender-ml/lavender/phaseapi"
)

// PhaseCmd is the client of the exporter's heartbeat API.
type PhaseCmd struct {
	Start PhaseStartCmd `cmd:"" help:"Start a phase (the run log gets START NAME)."`
	Ping  PhasePingCmd  `cmd:"" help:"Send a heartbeat for a running phase (never logged)."`
	End   PhaseEndCmd   `cmd:"" help:"End a phase (the run log gets END NAME DURATION)."`
	Run   PhaseRunCmd   `cmd:"" help:"Run a command as a phase: start, a ping every --every, end ok or failed by exit code."`
}

// phaseClientFlags locate the exporter. The URL never carries credentials:
// the password comes from a file so it stays out of ps and shell history.
type phaseClientFlags struct {
	URL          string        `name:"url" default:"${phase_url}" help:"Base URL of the lavender exporter."`
	Username     string        `name:"username" aliases:"web.user" help:"Basic-auth user name, when the exporter's --web.config.file asks for one."`
	PasswordFile string        `name:"password-file" help:"File holding the basic-auth password (trailing newline ignored)."`
	CAFile       string        `name:"tls.ca-file" type:"existingfile" help:"PEM file of the CA that signed the exporter's TLS certificate, for an https --url with a private CA."`
	Timeout      time.Duration `name:"timeout" default:"${phase_timeout}" env:"LAVENDER_PHASE_TIMEOUT" help:"Timeout of each request to the exporter."`
}

// config is the heartbeat client's configuration from the flags.
func (f *phaseClientFlags) config() heartbeat.ClientConfig {
	return heartbeat.ClientConfig{URL: f.URL, Username: f.Username, PasswordFile: f.PasswordFile, CAFile: f.CAFile, Timeout: f.Timeout}
}

// progressFlags are the optional progress a heartbeat carries; the
// exporter checks them (step <= total), so that every client gets the same
// answer.
type progressFlags struct {
	Step  *uint64 `name:"step" env:"LAVENDER_PHASE_STEP" help:"Steps done so far (0 or more), e.g. the trainer's global step."`
	Total *uint64 `name:"total" env:"LAVENDER_PHASE_TOTAL" help:"Steps in the whole phase (1 or more); with --step, gives the ETA."`
}

// send sends one heartbeat (app.PhaseEvent).
func (f *phaseClientFlags) send(g *Globals, name, event, status string, progress progressFlags) error {
	req := phaseapi.HeartbeatRequest{Phase: name, Event: event, Status: status, Step: progress.Step, Total: progress.Total}
	return app.PhaseEvent(context.Background(), f.config(), req, g.Stderr)
}

type PhaseStartCmd struct {
	phaseClientFlags
	progressFlags
	Name string `arg:"" help:"Phase name, e.g. \"Pretrain 1/3\"."`
}

func (c *PhaseStartCmd) Run(g *Globals) error {
	return c.send(g, c.Name, phaseapi.EventStart, "", c.progressFlags)
}

type PhasePingCmd struct {
	phaseClientFlags
	progressFlags
	Name string `arg:"" help:"Phase name."`
}

func (c *PhasePingCmd) Run(g *Globals) error {
	return c.send(g, c.Name, phaseapi.EventPing, "", c.progressFlags)
}

type PhaseEndCmd struct {
	phaseClientFlags
	progressFlags
	Name   string `arg:"" help:"Phase name."`
	Failed bool   `help:"Mark the phase as failed." env:"LAVENDER_PHASE_FAILED"`
}

func (c *PhaseEndCmd) Run(g *Globals) error {
	status := phaseapi.StatusOK
	if c.Failed {
		status = phaseapi.StatusFailed
	}
	return c.send(g, c.Name, phaseapi.EventEnd, status, c.progressFlags)
}

type PhaseRunCmd struct {
	phaseClientFlags
	Every   time.Duration `name:"every" default:"${phase_every}" env:"LAVENDER_PHASE_EVERY" help:"Ping interval."`
	Name    string        `arg:"" help:"Phase name."`
	Command []string      `arg:"" passthrough:"" help:"Command and arguments, after --."`
}

// Run exits with the command's exit code: the wrapper must be invisible to
// whatever runs it (a shell's set -e, a scheduler's retry policy).
func (c *PhaseRunCmd) Run(g *Globals) error {
	tty := heartbeat.ControllingTerminal()
	if tty != nil {
		defer tty.Close()
	}
	code, err := c.run(context.Background(), g, os.Stdin, tty)
	if err != nil {
		fmt.Fprintln(g.Stderr, "lavender:", err)
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

// run is Run with the streams and terminal tests give (app.RunPhase).
func (c *PhaseRunCmd) run(ctx context.Context, g *Globals, stdin io.Reader, tty *os.File) (int, error) {
	o := app.PhaseRunOptions{Client: c.config(), Phase: c.Name, Every: c.Every, Command: c.Command}
	return app.RunPhase(ctx, o, app.Env{Logger: g.Logger}, stdin, g.Stdout, g.Stderr, tty)
}
