package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// startExporter runs `lavender exporter`, parsed from its flags, in the
// test process on a procfs with swap 54 % full until the test ends, and
// returns its base URL once it listens, and its run-log dir. Nothing the
// tests that use it check needs a process of its own.
func startExporter(t *testing.T, extra ...string) (base, logDir string) {
	t.Helper()
	logDir = filepath.Join(t.TempDir(), "logs")
	exporter := startInProcess(t, nil, append([]string{"exporter", "--runlog.dir", logDir,
		"--path.procfs", testkit.SwapProcfs(t, 0.54)}, extra...)...)
	return exporter.base, logDir
}

// testGlobals are the Globals of a command run in-process: a text logger
// on stderr.
func testGlobals(stdout, stderr io.Writer) *Globals {
	return &Globals{Logger: slog.New(slog.NewTextHandler(stderr, nil)), Stdout: stdout, Stderr: stderr}
}
