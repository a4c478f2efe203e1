package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func expGlobals(stdout, stderr io.Writer) *Globals {
	return &Globals{Logger: slog.New(slog.NewTextHandler(stderr, nil)), Stdout: stdout, Stderr: stderr}
}

// expStartExporter runs `lavender exporter` on 127.0.0.1:0 until the test ends
// and returns its base URL and the run-log dir.
func expStartExporter(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	logDir := filepath.Join(t.TempDir(), "logs")
	args := append([]string{"exporter", "--web.listen-address=127.0.0.1:0", "--runlog.dir", logDir,
		"--path.procfs", fakeProcfsAt(t, 0.54)}, extra...)
	cli := parseCLI(t, args...)
	base := startInProcess(t, "exporter", func(ctx context.Context, onListen func([]net.Addr)) error {
		return cli.Exporter.serve(ctx, expGlobals(io.Discard, io.Discard), onListen)
	})
	return base, logDir
}

func TestExporterCommand(t *testing.T) {
	base, logDir := expStartExporter(t)

	for path, want := range map[string]string{
		"/-/healthy": "Healthy",
		"/-/ready":   "Ready",
		"/":          "/metrics",
	} {
		if code, body := httpDo(t, "GET", base+path, nil); code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d %q", path, code, body)
		}
	}

	_, stderr, err := runCLI(t, "phase", "start", "Pretrain 1/3", "--url", base)
	if err != nil {
		t.Fatalf("phase start: %v %s", err, stderr)
	}
	if _, _, err := runCLI(t, "phase", "ping", "Pretrain 1/3", "--url", base); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "phase", "end", "Pretrain 1/3", "--failed", "--url", base); err != nil {
		t.Fatal(err)
	}
	// The API's errors reach the user.
	_, _, err = runCLI(t, "phase", "end", "Never started", "--url", base)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("end of an unknown phase: %v", err)
	}

	code, metrics := httpDo(t, "GET", base+"/metrics", nil)
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		"lavender_swap_used_ratio 0.53999",
		"lavender_swap_total_bytes 3.4359738368e+10",
		`lavender_phase_failed{phase="Pretrain 1/3"} 1`,
		`lavender_phase_heartbeats_total{phase="Pretrain 1/3"} 3`,
		"lavender_run_start_timestamp_seconds{run=",
		"lavender_build_info{",
		"go_goroutines ",
		"process_cpu_seconds_total ",
		"promhttp_metric_handler_requests_total",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	got := runlogEntries(t, logDir)
	if want := "RUN start|START Pretrain 1/3|END   Pretrain 1/3 0s failed"; strings.Join(got, "|") != want {
		t.Errorf("run log entries %q, want %q", got, want)
	}
}

func TestExporterCommandBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	webConfig := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(webConfig, fmt.Appendf(nil, "basic_auth_users:\n  trainer: %s\n", hash), 0o600); err != nil {
		t.Fatal(err)
	}
	passwordFile := filepath.Join(dir, "password")
	if err := os.WriteFile(passwordFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := expStartExporter(t, "--web.config.file", webConfig)

	if code, _ := httpDo(t, "GET", base+"/metrics", nil); code != http.StatusUnauthorized {
		t.Errorf("/metrics without credentials: %d", code)
	}
	if _, _, err := runCLI(t, "phase", "start", "Train", "--url", base); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("phase start without credentials: %v", err)
	}
	if _, _, err := runCLI(t, "phase", "start", "Train", "--url", base, "--username", "trainer", "--password-file", passwordFile); err != nil {
		t.Errorf("phase start with credentials: %v", err)
	}
	t.Setenv("LAVENDER_URL", base)
	if _, _, err := runCLI(t, "phase", "ping", "Train", "--web.user", "trainer", "--password-file", passwordFile); err != nil {
		t.Errorf("phase ping with LAVENDER_URL and --web.user: %v", err)
	}
	_, _, err = runCLI(t, "phase", "ping", "Train", "--password-file", passwordFile)
	if err == nil || !strings.Contains(err.Error(), "--username") {
		t.Errorf("password file without user name: %v", err)
	}
}
