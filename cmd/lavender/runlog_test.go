package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

// runCLI runs the CLI in-process and returns its stdout, stderr and error.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	// Synchronised: a lingering HTTP transport goroutine logs through
	// the standard logger into stderr while the command writes to it.
	var stdout, stderr testkit.SyncBuffer
	err := runExiting(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// kongExit carries the status kong exits with (--help, --version) out of
// run, as os.Exit would end it there.
type kongExit int

func runExiting(args []string, stdout, stderr *testkit.SyncBuffer) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		code, ok := r.(kongExit)
		if !ok {
			panic(r)
		}
		if code != 0 {
			err = fmt.Errorf("exit %d: %s", int(code), stderr.String())
		}
	}()
	return run(args, stdout, stderr, func(code int) { panic(kongExit(code)) })
}

func TestRunlogAppendStartsARun(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LAVENDER_RUNLOG_DIR", dir) // every flag has an environment variable
	if _, _, err := runCLI(t, "runlog", "append", "hello"); err != nil {
		t.Fatal(err)
	}
	path, err := runlog.CurrentPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	f, err := runlog.Parse(data)
	if err != nil || !strings.HasSuffix(f.First, " RUN start") || !strings.HasSuffix(f.Entries[0], " hello") {
		t.Errorf("got %v\n%s", err, data)
	}
}

func TestRunlogErrors(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"show without a run", []string{"runlog", "show", "--runlog.dir", empty}, "no run log yet"},
		{"path without a run", []string{"runlog", "path", "--runlog.dir", empty}, empty},
		{"cap below the minimum", []string{"runlog", "new", "--runlog.dir", empty, "--runlog.max-bytes", "100"}, "--runlog.max-bytes must be at least 256, not 100"},
		{"append needs a message", []string{"runlog", "append", "--runlog.dir", empty}, "expected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := runCLI(t, tc.args...)
			if err == nil {
				t.Fatalf("no error; stderr %q", stderr)
			}
			if msg := err.Error() + stderr; !strings.Contains(msg, tc.want) {
				t.Errorf("error %q, want it to mention %q", msg, tc.want)
			}
		})
	}
}

// TestVersion: `lavender version` and `lavender --version` (as Prometheus
// tools accept it) print the same report, without lines the build left
// empty (no blank "build user:" or "build date:", no "tags: unknown").
func TestVersion(t *testing.T) {
	out, _, err := runCLI(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	flagOut, _, err := runCLI(t, "--version")
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	if flagOut != out {
		t.Errorf("--version printed %q, version printed %q", flagOut, out)
	}
	for _, want := range []string{"lavender, version " + lavender.Version(), "go version:", "platform:"} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), ":") || strings.Contains(line, "unknown") || strings.Contains(line, "()") {
			t.Errorf("version prints an empty or unknown value: %q", line)
		}
	}
}

// TestBareCommandPrintsUsage: `lavender` alone lists the commands, one line
// each, and exits 1, rather than kong's bare `expected one of …`.
func TestBareCommandPrintsUsage(t *testing.T) {
	var stdout, stderr testkit.SyncBuffer
	err := runExiting(nil, &stdout, &stderr)
	var code exitCode
	if !errors.As(err, &code) || code != 1 {
		t.Errorf("run() = %v, want exit status 1", err)
	}
	usage := stderr.String()
	if !strings.HasPrefix(usage, "Usage: lavender <command>") {
		t.Fatalf("stderr %q, want the usage", usage)
	}
	_, commands, ok := strings.Cut(usage, "\nCommands:\n")
	if !ok {
		t.Fatalf("usage has no Commands section:\n%s", usage)
	}
	commands, _, _ = strings.Cut(commands, "\n\n")
	var names []string
	for _, line := range strings.Split(commands, "\n") {
		fields := strings.Fields(line)
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") || len(fields) < 2 {
			t.Errorf("command line %q is not `  name  help` on one line", line)
			continue
		}
		names = append(names, fields[0])
	}
	if want := "serve version runlog exporter phase bridge send check bark"; strings.Join(names, " ") != want {
		t.Errorf("commands %q, want %q", names, want)
	}
}
