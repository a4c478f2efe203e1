package main

import (
	"fmt"
	"strings"

	"github.com/lavender-ml/lavender/runlog"
)

// logged returns the run-log options with g's logger, which hears about a
// damaged run log moved aside.
func (f runlogFlags) logged(g *Globals) runlog.Options {
	o := f.options()
	o.Logger = g.Logger
	return o
}

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
	if err := c.runlogOptions().Check(); err != nil {
		return err
	}
	l, err := runlog.Start(c.logged(g), c.Header, runlog.RunStart)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(g.Stdout, l.Path())
	return err
}

type RunlogAppendCmd struct {
	runlogFlags
	Message []string `arg:"" help:"Words of the entry; joined with spaces."`
}

func (c *RunlogAppendCmd) Run(g *Globals) error {
	if err := c.runlogOptions().Check(); err != nil {
		return err
	}
	l, _, err := runlog.CurrentOrStart(c.logged(g), "", runlog.RunStart)
	if err != nil {
		return err
	}
	return l.Append(strings.Join(c.Message, " "))
}

type RunlogShowCmd struct {
	runlogDirFlags
}

func (c *RunlogShowCmd) Run(g *Globals) error {
	l, err := runlog.Current(runlog.Options{Dir: c.Dir, Logger: g.Logger})
	if err != nil {
		return err
	}
	data, err := l.Read()
	if err != nil {
		return err
	}
	_, err = g.Stdout.Write(data)
	return err
}

type RunlogPathCmd struct {
	runlogDirFlags
}

func (c *RunlogPathCmd) Run(g *Globals) error {
	path, err := runlog.CurrentPath(c.Dir)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(g.Stdout, path)
	return err
}
