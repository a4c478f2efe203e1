package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

// TestBridgeCommand: `lavender bridge` serves the webhook, its metrics and
// its run log, and picks up a new target file on SIGHUP and on
// POST /-/reload; a bad file fails the reload and keeps the targets.
func TestBridgeCommand(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	bark := barktest.New(t)
	dir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.URL + "/KEY/$0\n"})
	logDir := filepath.Join(t.TempDir(), "logs")
	bridge := testkit.StartCommand(t, "bridge", "--web.listen-address=127.0.0.1:0", "--bark.config-dir", dir, "--runlog.dir", logDir,
		"--bark.timeout=5s", "--bark.prefix=[box]")
	base := bridge.URL(t)
	testkit.WaitReady(t, nil, base, "", "")

	for _, path := range []string{"/-/healthy", "/-/ready", "/"} {
		if code, _ := testkit.MustDo(t, nil, "GET", base+path, nil, "", ""); code != 200 {
			t.Errorf("GET %s = %d", path, code)
		}
	}
	payload, err := os.ReadFile(filepath.Join("..", "webhook", "testdata", "firing_swap_54.json"))
	if err != nil {
		t.Fatal(err)
	}
	code, answer := testkit.MustDo(t, nil, "POST", base+"/webhook", payload, "", "")
	if code != 200 || answer != "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n" {
		t.Fatalf("POST /webhook = %d %q", code, answer)
	}
	// The id is the incident's, the group the host the alert is about.
	want := "/KEY/%5Bbox%5D%20swap%2054%25%20full%20%2816.3%2F32.0%20GB%29%20%E2%80%94%20consider%20intervening?level=passive&isArchive=0&id=1d33b2aa3d8b8b6a&group=gpu-box"
	if got := bark.Pushes(); len(got) != 1 || got[0].RequestURI != want {
		t.Errorf("Bark got %+v, want one push to %q", got, want)
	}
	if code, _ := testkit.MustDo(t, nil, "GET", base+"/webhook", nil, "", ""); code != 405 {
		t.Errorf("GET /webhook = %d", code)
	}

	l, err := runlog.Current(runlog.Options{Dir: logDir})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := l.Read()
	if !strings.Contains(string(data), " BARK swap 54% sent ok=1 fail=0\n") {
		t.Errorf("run log:\n%s", data)
	}

	m := testkit.Scrape(t, nil, base+"/metrics")
	for _, s := range []struct {
		name   string
		labels testkit.Labels
	}{
		{"lavender_bark_pushes_total", testkit.Labels{"result": "ok", "target": "phone.bark.env:1"}},
		{"lavender_webhook_requests_total", testkit.Labels{"code": "200"}},
		{"lavender_webhook_requests_total", testkit.Labels{"code": "405"}},
		{"lavender_webhook_alerts_total", testkit.Labels{"action": "pushed", "status": "firing"}},
		{"lavender_bark_targets", nil},
		{"lavender_bark_push_duration_seconds_count", nil},
	} {
		if v := m.MustValue(t, s.name, s.labels); v != 1 {
			t.Errorf("%s%v = %v, want 1", s.name, s.labels, v)
		}
	}
	for _, name := range []string{"lavender_build_info", "go_goroutines"} {
		if !m.Has(name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	// A second phone, picked up by SIGHUP and by POST /-/reload.
	if err := os.WriteFile(filepath.Join(dir, "tablet.bark.env"), []byte(bark.URL+"/KEY/$0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := bridge.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		m, err := testkit.FetchMetrics(nil, base+"/metrics", "", "")
		if err != nil {
			return false
		}
		v, err := m.Value("lavender_bark_targets", nil)
		return err == nil && v == 2
	}, "SIGHUP to reload the targets")
	os.WriteFile(filepath.Join(dir, "bad.bark.env"), []byte("https://x/KEY/\n"), 0o600)
	if code, body := testkit.MustDo(t, nil, "POST", base+"/-/reload", nil, "", ""); code != 500 || !strings.Contains(body, "bad.bark.env:1") {
		t.Errorf("POST /-/reload = %d %q", code, body)
	}
	os.Remove(filepath.Join(dir, "bad.bark.env"))
	if code, body := testkit.MustDo(t, nil, "POST", base+"/-/reload", nil, "", ""); code != 200 || body != "loaded 2 Bark targets\n" {
		t.Errorf("POST /-/reload = %d %q", code, body)
	}
}
