package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"golang.org/x/crypto/bcrypt"
)

// expParseArgs parses args as run does, without running the command, so a
// test can call a command's serve or run method with its own context.
func expParseArgs(t *testing.T, args ...string) *CLI {
	t.Helper()
	var cli CLI
	parser, err := kong.New(&cli, kong.Name("lavender"), kong.DefaultEnvars("LAVENDER"),
		kong.Exit(func(code int) { t.Fatalf("kong exit %d", code) }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &cli
}

func expGlobals(stdout, stderr io.Writer) *Globals {
	return &Globals{Logger: slog.New(slog.NewTextHandler(stderr, nil)), Stdout: stdout, Stderr: stderr}
}

// expFakeProcfs writes a meminfo with swap 54 % full (32 GiB) and a vmstat.
func expFakeProcfs(t *testing.T) string {
	dir := t.TempDir()
	meminfo := "MemTotal: 65536000 kB\nMemFree: 1234567 kB\nMemAvailable: 9830400 kB\n" +
		"SwapCached: 1048576 kB\nSwapTotal: 33554432 kB\nSwapFree: 15435039 kB\n"
	vmstat := "pgpgin 1\npswpin 10\npswpout 20\n"
	for name, content := range map[string]string{"meminfo": meminfo, "vmstat": vmstat} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// expStartExporter runs `lavender exporter` on 127.0.0.1:0 until the test ends
// and returns its base URL and the run-log dir.
func expStartExporter(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	logDir := filepath.Join(t.TempDir(), "logs")
	args := append([]string{"exporter", "--web.listen-address=127.0.0.1:0", "--runlog.dir", logDir,
		"--path.procfs", expFakeProcfs(t)}, extra...)
	cli := expParseArgs(t, args...)
	base := startInProcess(t, "exporter", func(ctx context.Context, onListen func([]net.Addr)) error {
		return cli.Exporter.serve(ctx, expGlobals(io.Discard, io.Discard), onListen)
	})
	return base, logDir
}

func expGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestExporterCommand(t *testing.T) {
	base, logDir := expStartExporter(t)

	for path, want := range map[string]string{
		"/-/healthy": "Healthy",
		"/-/ready":   "Ready",
		"/":          "/metrics",
	} {
		if code, body := expGet(t, base+path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d %q", path, code, body)
		}
	}

	_, stderr, err := expRunCLI(t, "phase", "start", "Pretrain 1/3", "--url", base)
	if err != nil {
		t.Fatalf("phase start: %v %s", err, stderr)
	}
	if _, _, err := expRunCLI(t, "phase", "ping", "Pretrain 1/3", "--url", base); err != nil {
		t.Fatal(err)
	}
	if _, _, err := expRunCLI(t, "phase", "end", "Pretrain 1/3", "--failed", "--url", base); err != nil {
		t.Fatal(err)
	}
	// The API's errors reach the user.
	_, _, err = expRunCLI(t, "phase", "end", "Never started", "--url", base)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("end of an unknown phase: %v", err)
	}

	code, metrics := expGet(t, base+"/metrics")
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

	if code, _ := expGet(t, base+"/metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics without credentials: %d", code)
	}
	if _, _, err := expRunCLI(t, "phase", "start", "Train", "--url", base); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("phase start without credentials: %v", err)
	}
	if _, _, err := expRunCLI(t, "phase", "start", "Train", "--url", base, "--username", "trainer", "--password-file", passwordFile); err != nil {
		t.Errorf("phase start with credentials: %v", err)
	}
	t.Setenv("LAVENDER_URL", base)
	if _, _, err := expRunCLI(t, "phase", "ping", "Train", "--web.user", "trainer", "--password-file", passwordFile); err != nil {
		t.Errorf("phase ping with LAVENDER_URL and --web.user: %v", err)
	}
	_, _, err = expRunCLI(t, "phase", "ping", "Train", "--password-file", passwordFile)
	if err == nil || !strings.Contains(err.Error(), "--username") {
		t.Errorf("password file without user name: %v", err)
	}
}

// expRunCLI runs the CLI in-process, as main does.
func expRunCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	exit := -1
	err := run(args, &stdout, &stderr, func(code int) { exit = code })
	if exit > 0 && err == nil {
		err = errors.New(stderr.String())
	}
	return stdout.String(), stderr.String(), err
}
