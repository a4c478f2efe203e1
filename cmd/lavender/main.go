// Command lavender keeps long ML training runs alive: it exports swap and
// training-phase metrics, turns swap alerts into silent Bark pushes, and
// keeps a tiny per-run log. This file only parses flags and wires packages.
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"

	"github.com/alecthomas/kong"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"

	"lavender/barkbridge"
	"lavender/runlog"
)

// defaultVersion is reported when the build did not stamp one with
// -ldflags "-X github.com/prometheus/common/version.Version=…".
const defaultVersion = "0.1.0"

func init() {
	if version.Version == "" {
		version.Version = defaultVersion
	}
}

// CLI is the whole command line. Every flag can also be set through an
// environment variable: LAVENDER_ plus the flag name in upper case, with
// dots and dashes as underscores (--runlog.max-bytes is
// LAVENDER_RUNLOG_MAX_BYTES).
type CLI struct {
	LogLevel  string `name:"log.level" default:"info" enum:"debug,info,warn,error" help:"Only log messages with the given severity or above (${enum})."`
	LogFormat string `name:"log.format" default:"logfmt" enum:"logfmt,json" help:"Output format of log messages (${enum})."`

	Serve    ServeCmd    `cmd:"" help:"Run everything in one process: metrics, heartbeat API, webhook, run log and the swap watchdog."`
	Version  VersionCmd  `cmd:"" help:"Print version, revision and Go version."`
	Runlog   RunlogCmd   `cmd:"" help:"Start, append to and read the per-run log."`
	Exporter ExporterCmd `cmd:"" help:"Serve swap and training-phase metrics and the heartbeat API."`
	Phase    PhaseCmd    `cmd:"" help:"Report training phases to the exporter: start, ping, end, or run a command as a phase."`
	Bridge   BridgeCmd   `cmd:"" help:"Serve the Alertmanager webhook that turns alerts into silent Bark pushes."`
	Bark     BarkCmd     `cmd:"" help:"Send a Bark push now, or check the *.bark.env files."`
}

// VersionCmd prints build information the way Prometheus tools do.
type VersionCmd struct{}

func (VersionCmd) Run(g *Globals) error {
	_, err := fmt.Fprintln(g.Stdout, version.Print("lavender"))
	return err
}

// Globals are what every command's Run receives.
type Globals struct {
	Logger *slog.Logger
	Stdout io.Writer
	Stderr io.Writer
}

// runlogFlags are shared by every command that touches the run log.
type runlogFlags struct {
	Dir      string `name:"runlog.dir" default:"logs" help:"Directory of the per-run logs." type:"path"`
	MaxBytes int    `name:"runlog.max-bytes" default:"1024" help:"Hard cap on a run log's size in bytes (at least 256)."`
}

func (f runlogFlags) options() runlog.Options {
	return runlog.Options{Dir: f.Dir, MaxBytes: f.MaxBytes}
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	lvl := promslog.NewLevel()
	if err := lvl.Set(level); err != nil {
		return nil, err
	}
	fmtr := promslog.NewFormat()
	if err := fmtr.Set(format); err != nil {
		return nil, err
	}
	// Every line is scrubbed of device keys and APNs tokens, whatever wrote it.
	return slog.New(barkbridge.NewScrubHandler(promslog.New(&promslog.Config{Level: lvl, Format: fmtr, Writer: w}).Handler())), nil
}

// routeStdLog sends the standard log package, where net/http speaks (e.g.
// "Unsolicited response received on idle HTTP channel", quoting what a
// server sent, key included), through logger and its scrubbing.
func routeStdLog(logger *slog.Logger) (restore func()) {
	w, flags, prefix := log.Writer(), log.Flags(), log.Prefix()
	log.SetOutput(slog.NewLogLogger(logger.Handler(), slog.LevelWarn).Writer())
	log.SetFlags(0)
	log.SetPrefix("")
	return func() {
		log.SetOutput(w)
		log.SetFlags(flags)
		log.SetPrefix(prefix)
	}
}

// run parses args and runs the chosen command; main and tests share it.
func run(args []string, stdout, stderr io.Writer, exit func(int)) error {
	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("lavender"),
		kong.Description("Keeps long ML training runs alive: swap and phase metrics, silent Bark pushes, and a 1 KB log per run."),
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}),
		kong.DefaultEnvars("LAVENDER"),
		kong.Writers(stdout, stderr),
		kong.Exit(exit),
	)
	if err != nil {
		return err
	}
	ctx, err := parser.Parse(args)
	if err != nil {
		return err
	}
	logger, err := newLogger(cli.LogLevel, cli.LogFormat, stderr)
	if err != nil {
		return err
	}
	defer routeStdLog(logger)()
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
