package main

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// swapAlertWebhook is Alertmanager's payload for the swap alert. Each i is
// a different alert (fingerprint and start), so the bridge's dedup lets
// every one through to Bark.
func swapAlertWebhook(i int) []byte {
	return fmt.Appendf(nil, `{"version":"4","status":"firing","receiver":"bark","groupKey":"{}:{alertname=\"SwapUsageHigh\"}",`+
		`"alerts":[{"status":"firing","labels":{"alertname":"SwapUsageHigh","instance":"box:9877"},`+
		`"annotations":{"swap_used_ratio":"0.54","swap_used_bytes":"17501991731","swap_total_bytes":"3.4359738368e+10"},`+
		`"startsAt":"2026-04-24T00:45:%02d.%06dZ","fingerprint":"%016x"}]}`, i%60, i, i+1)
}

// quietServeArgs are serve's flags for a test that is not about the
// watchdog: a procfs with swap 10 % full, the watchdog off, the given Bark
// config and logs dirs, logs at debug level, a port from the kernel.
func quietServeArgs(t *testing.T, barkDir, logDir string, extra ...string) []string {
	return append([]string{"serve", "--web.listen-address=127.0.0.1:0", "--log.level=debug",
		"--path.procfs=" + testkit.SwapProcfs(t, 0.10), "--watchdog.interval=0",
		"--runlog.dir=" + logDir, "--bark.config-dir=" + barkDir}, extra...)
}

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
