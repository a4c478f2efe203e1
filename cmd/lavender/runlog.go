package main

import (
	"strings"

	"github.com/lavender-ml/lavender/app"
)

// RunlogCmd groups the run-log subcommands.
type RunlogCmd struct {
	New    RunlogNewCmd    `cmd:"" help:"Start a new run and print its file's path."`
	Append RunlogAppendCmd `cmd:"" help:"Append an entry to the current run (starting one if there is none)."`
	Show   RunlogShowCmd   `cmd:"" help:"Print the current run's log."`
	Path   RunlogPathCmd   `cmd:"" help:"Print the current run's path."`
}

type RunlogNewCmd struct {
	runlogFlags
	Header string `help:"Second header line, e.g. \"device=cuda job=sft-7\" (serve writes \"device=<cpu|cuda|mps> lavender=v<version>\")." env:"LAVENDER_RUNLOG_HEADER"`
}

func (c *RunlogNewCmd) Run(g *Globals) error {
	return app.NewRun(c.runlogOptions(), c.Header, app.Env{Logger: g.Logger}, g.Stdout)
}

type RunlogAppendCmd struct {
	runlogFlags
	Message []string `arg:"" help:"Words of the entry; joined with spaces."`
}

func (c *RunlogAppendCmd) Run(g *Globals) error {
	return app.AppendToRun(c.runlogOptions(), strings.Join(c.Message, " "), app.Env{Logger: g.Logger})
}

type RunlogShowCmd struct {
	runlogDirFlags
}

func (c *RunlogShowCmd) Run(g *Globals) error {
	return app.ShowRun(c.Dir, app.Env{Logger: g.Logger}, g.Stdout)
}

type RunlogPathCmd struct {
	runlogDirFlags
}

func (c *RunlogPathCmd) Run(g *Globals) error {
	return app.PrintRunPath(c.Dir, g.Stdout)
}
