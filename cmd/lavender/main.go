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
	"runtime/debug"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"

	"github.com/lavender-ml/lavender"
	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/diskguard"
	"github.com/lavender-ml/lavender/notify"
	"github.com/lavender-ml/lavender/ntfy"
	"github.com/lavender-ml/lavender/runlog"
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

// versionFlag is --version: kong.VersionFlag, but printing versionText
// itself rather than a kong variable, which kong would expand again for
// every flag (see flagDefaults).
type versionFlag bool

func (versionFlag) BeforeReset(app *kong.Kong) error {
	fmt.Fprintln(app.Stdout, versionText())
	app.Exit(0)
	return nil
}

// VersionCmd prints build information the way Prometheus tools do.
type VersionCmd struct{}

func (VersionCmd) Run(g *Globals) error {
	_, err := fmt.Fprintln(g.Stdout, versionText())
	return err
}

// versionText is version.Print's report without the lines the build left
// empty: a plain `go build` stamps no build user or date, and no tags.
// The revision and the commit's date come from the VCS stamp that `go
// build` embeds when it can.
func versionText() string {
	settings := map[string]string{}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
	}
	var b strings.Builder
	b.WriteString("lavender, version " + version.Version)
	var about []string
	if version.Branch != "" {
		about = append(about, "branch: "+version.Branch)
	}
	if rev := version.GetRevision(); rev != "" && rev != "unknown" {
		about = append(about, "revision: "+rev)
	}
	if len(about) > 0 {
		b.WriteString(" (" + strings.Join(about, ", ") + ")")
	}
	line := func(key, value string) {
		if value != "" && value != "unknown" {
			fmt.Fprintf(&b, "\n  %-18s%s", key+":", value)
		}
	}
	line("build user", version.BuildUser)
	line("build date", version.BuildDate)
	line("commit date", settings["vcs.time"])
	line("go version", version.GoVersion)
	line("platform", version.GoOS+"/"+version.GoArch)
	line("tags", version.GetTags())
	return b.String()
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

// validateRunlog is runlog's own check, naming the flag.
func (f runlogFlags) validateRunlog() error {
	if err := runlog.CheckMaxBytes(f.MaxBytes); err != nil {
		return fmt.Errorf("--runlog.max-bytes %w", err)
	}
	return nil
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
	// Every channel's secrets, whichever channel loaded them.
	scrub := func(s string) string { return ntfy.Scrub(bark.Scrub(s)) }
	return slog.New(notify.NewScrubHandler(promslog.New(&promslog.Config{Level: lvl, Format: fmtr, Writer: w}).Handler(), scrub)), nil
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
