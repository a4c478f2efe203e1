// Command lavender keeps long ML training runs alive: it exports swap and
// training-phase metrics, turns swap alerts into silent Bark pushes, and
// keeps a tiny per-run log. This file only parses flags and wires packages.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/alecthomas/kong"
	"github.com/prometheus/common/version"

	"github.com/lavender-ml/lavender"
	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/diskguard"
)

// The version is the repository's VERSION file unless the build stamped
// another with -ldflags "-X github.com/prometheus/common/version.Version=…".
func init() {
	if version.Version == "" {
		version.Version = lavender.Version()
	}
}

// CLI is the whole command line. Every flag can also be set through an
// environment variable: LAVENDER_ plus the flag name in upper case, with
// dots and dashes as underscores (--runlog.max-bytes is
// LAVENDER_RUNLOG_MAX_BYTES).
type CLI struct {
	LogLevel    string      `name:"log.level" default:"info" enum:"debug,info,warn,error" help:"Only log messages with the given severity or above (${enum})."`
	LogFormat   string      `name:"log.format" default:"logfmt" enum:"logfmt,json" help:"Output format of log messages (${enum})."`
	VersionFlag versionFlag `name:"version" env:"-" help:"Print version information and exit."`

	Serve    ServeCmd    `cmd:"" help:"One process for all: metrics, API, webhook, run log, watchdog."`
	Version  VersionCmd  `cmd:"" help:"Print version, revision and Go version."`
	Runlog   RunlogCmd   `cmd:"" help:"Start, append to and read the per-run log."`
	Exporter ExporterCmd `cmd:"" help:"Serve swap and training-phase metrics and the heartbeat API."`
	Phase    PhaseCmd    `cmd:"" help:"Report training phases, or run a command as a phase."`
	Bridge   BridgeCmd   `cmd:"" help:"Serve the Alertmanager webhook that sends silent Bark pushes."`
	Send     SendCmd     `cmd:"" help:"Push a message, or --test, to every target now."`
	Check    CheckCmd    `cmd:"" help:"Validate the *.bark.env and *.ntfy.env files."`
	Bark     BarkCmd     `cmd:"" help:"bark send, bark check: send and check's first names."`
}

// versionFlag is --version: kong.VersionFlag, but printing app.VersionText
// itself rather than a kong variable, which kong would expand again for
// every flag (see flagDefaults).
type versionFlag bool

func (versionFlag) BeforeReset(k *kong.Kong) error {
	fmt.Fprintln(k.Stdout, app.VersionText())
	k.Exit(0)
	return nil
}

// VersionCmd prints build information the way Prometheus tools do.
type VersionCmd struct{}

func (VersionCmd) Run(g *Globals) error {
	_, err := fmt.Fprintln(g.Stdout, app.VersionText())
	return err
}

// Globals are what every command's Run receives.
type Globals struct {
	Logger *slog.Logger
	Stdout io.Writer
	Stderr io.Writer
	// Clock is serve's and the exporter's time source: heartbeat stamps and
	// the watchdog's polls read it. nil: time.Now; tests pass a fake clock
	// to make a 10-minute stall happen at once.
	Clock func() time.Time
	// Statfs reads the watched filesystems; nil: the real statfs. Tests
	// pass one that hangs, as a dead NFS server does.
	Statfs diskguard.StatFunc
}

// runlogDirFlags locate the run logs; every command that touches them has it.
type runlogDirFlags struct {
	Dir string `name:"runlog.dir" default:"${runlog_dir}" help:"Directory of the per-run logs." type:"path"`
}

// runlogFlags are for the commands that write run logs.
type runlogFlags struct {
	runlogDirFlags
	MaxBytes int `name:"runlog.max-bytes" default:"${runlog_max_bytes}" help:"Hard cap on a run log's size in bytes (at least ${runlog_min_bytes})."`
}

// newParser is the kong parser of cli; run uses it, and the tests that
// render the flag reference read its model.
func newParser(cli *CLI, stdout, stderr io.Writer, exit func(int)) (*kong.Kong, error) {
	return kong.New(cli,
		kong.Name("lavender"),
		kong.Description("Keeps long ML training runs alive: swap and phase metrics, silent Bark pushes, and a 1 KB log per run."),
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}),
		kong.DefaultEnvars("LAVENDER"),
		kong.Writers(stdout, stderr),
		kong.Exit(exit),
		flagDefaults(),
	)
}

// run parses args and runs the chosen command; main and tests share it.
func run(args []string, stdout, stderr io.Writer, exit func(int)) error {
	var cli CLI
	parser, err := newParser(&cli, stdout, stderr, exit)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		// Bare `lavender`: the commands, one line each, rather than kong's
		// `expected one of "serve", …`.
		ctx, err := kong.Trace(parser, nil)
		if err != nil {
			return err
		}
		parser.Stdout = stderr
		if err := ctx.PrintUsage(false); err != nil {
			return err
		}
		return exitCode(1)
	}
	ctx, err := parser.Parse(args)
	if err != nil {
		return err
	}
	logger, err := app.NewLogger(cli.LogLevel, cli.LogFormat, stderr)
	if err != nil {
		return err
	}
	defer app.RouteStdLog(logger)()
	return ctx.Run(&Globals{Logger: logger, Stdout: stdout, Stderr: stderr})
}

// exitCode is returned by a command that must exit with a given status
// and has already said why, e.g. `phase run` passing on its child's code.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr, os.Exit)
	var code exitCode
	switch {
	case errors.As(err, &code):
		os.Exit(int(code))
	case err != nil:
		fmt.Fprintln(os.Stderr, "lavender:", err)
		os.Exit(1)
	}
}
