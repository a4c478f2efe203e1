package app

import (
	"fmt"
	"io"

	"github.com/lavender-ml/lavender/runlog"
)

// The run-log commands (`lavender runlog new`, `append`, `show`, `path`):
// a damaged run log they meet is moved aside and env's logger hears of it.

// NewRun starts a new run whose second header line is header, and prints
// its file's path.
func NewRun(o RunlogOptions, header string, env Env, stdout io.Writer) error {
	if err := o.Check(); err != nil {
		return err
	}
	l, err := runlog.Start(o.logged(env.Logger), header, runlog.RunStart)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, l.Path())
	return err
}

// AppendToRun appends the entry to the current run, starting one if
// there is none.
func AppendToRun(o RunlogOptions, entry string, env Env) error {
	if err := o.Check(); err != nil {
		return err
	}
	l, _, err := runlog.CurrentOrStart(o.logged(env.Logger), "", runlog.RunStart)
	if err != nil {
		return err
	}
	return l.Append(entry)
}

// ShowRun prints the log of the current run in dir.
func ShowRun(dir string, env Env, stdout io.Writer) error {
	l, err := runlog.Current(runlog.Options{Dir: dir, Logger: env.Logger})
	if err != nil {
		return err
	}
	data, err := l.Read()
	if err != nil {
		return err
	}
	_, err = stdout.Write(data)
	return err
}

// PrintRunPath prints the path of the current run in dir.
func PrintRunPath(dir string, stdout io.Writer) error {
	path, err := runlog.CurrentPath(dir)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, path)
	return err
}
