package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// startExporter runs `lavender exporter` on a procfs with swap 54 % full
// until the test ends, and returns its base URL once it listens, and its
// run-log dir.
func startExporter(t *testing.T, extra ...string) (base, logDir string) {
	t.Helper()
	logDir = filepath.Join(t.TempDir(), "logs")
	exporter := testkit.StartCommand(t, append([]string{"exporter", "--web.listen-address=127.0.0.1:0", "--runlog.dir", logDir,
		"--path.procfs", testkit.SwapProcfs(t, 0.54)}, extra...)...)
	return exporter.URL(t), logDir
}

// testGlobals are the Globals of a command run in-process: a text logger
// on stderr.
func testGlobals(stdout, stderr io.Writer) *Globals {
	return &Globals{Logger: slog.New(slog.NewTextHandler(stderr, nil)), Stdout: stdout, Stderr: stderr}
}
