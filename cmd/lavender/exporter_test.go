package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

func TestExporterCommand(t *testing.T) {
	t.Parallel()
	base, logDir := startExporter(t)

	for path, want := range map[string]string{
		"/-/healthy": "Healthy",
		"/-/ready":   "Ready",
		"/":          "/metrics",
	} {
		if code, body := testkit.MustDo(t, nil, "GET", base+path, nil, "", ""); code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d %q", path, code, body)
		}
	}

	_, stderr, err := runCLI(t, "phase", "start", "Pretrain 1/3", "--url", base)
	if err != nil {
		t.Fatalf("phase start: %v %s", err, stderr)
	}
	// host:port, as LAVENDER_URL often reads for the Python client.
	if _, _, err := runCLI(t, "phase", "ping", "Pretrain 1/3", "--url", strings.TrimPrefix(base, "http://")); err != nil {
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

	code, metrics := testkit.MustDo(t, nil, "GET", base+"/metrics", nil, "", "")
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

	got := runlogtest.EntriesOf(t, runlogtest.Text(t, logDir))
	// The phase lasts as long as three CLI calls: 0s, or more on a loaded
	// machine; what counts here is that it ended failed.
	if want := regexp.MustCompile(`^RUN start\|START Pretrain 1/3\|END   Pretrain 1/3 \d+s failed$`); !want.MatchString(strings.Join(got, "|")) {
		t.Errorf("run log entries %q, want %s", got, want)
	}
}

func TestExporterCommandBasicAuth(t *testing.T) {
	webConfig := testkit.WriteWebConfig(t, testkit.WebConfig{Users: map[string]string{"trainer": "s3cret"}})
	passwordFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(passwordFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := startExporter(t, "--web.config.file", webConfig)

	if code, _ := testkit.MustDo(t, nil, "GET", base+"/metrics", nil, "", ""); code != http.StatusUnauthorized {
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
	_, _, err := runCLI(t, "phase", "ping", "Train", "--password-file", passwordFile)
	if err == nil || !strings.Contains(err.Error(), "--username") {
		t.Errorf("password file without user name: %v", err)
	}
}
