package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"lavender/runlog"
)

// fakeBark is a minimal Bark server: it records raw request URIs and answers
// Bark's JSON, 200 for key "KEY" and 400 for any other.
type fakeBark struct {
	*httptest.Server
	mu   sync.Mutex
	uris []string
}

func newFakeBark(t *testing.T) *fakeBark {
	t.Helper()
	b := &fakeBark{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.uris = append(b.uris, r.RequestURI)
		b.mu.Unlock()
		code := http.StatusOK
		if !strings.HasPrefix(r.URL.Path, "/KEY/") {
			code = http.StatusBadRequest
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"code": code, "message": "m", "timestamp": 1})
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *fakeBark) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.uris...)
}

// barkConfigDir writes files into a fresh dir, mode 0600, and returns it.
func barkConfigDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func parseCLI(t *testing.T, args ...string) *CLI {
	t.Helper()
	var cli CLI
	parser, err := kong.New(&cli, kong.Name("lavender"), kong.DefaultEnvars("LAVENDER"), flagVars(),
		kong.Exit(func(code int) { t.Fatalf("kong exit %d", code) }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &cli
}

// startBridge runs `lavender bridge` on 127.0.0.1:0 until the test ends and
// returns its base URL and the log output.
func startBridge(t *testing.T, args ...string) (string, *lockedBuffer) {
	t.Helper()
	cli := parseCLI(t, append([]string{"bridge", "--web.listen-address=127.0.0.1:0"}, args...)...)
	logs := &lockedBuffer{}
	g := &Globals{Logger: slog.New(slog.NewTextHandler(logs, nil)), Stdout: io.Discard, Stderr: logs}
	base := startInProcess(t, "bridge", func(ctx context.Context, onListen func([]net.Addr)) error {
		return cli.Bridge.serve(ctx, g, onListen)
	})
	return base, logs
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func httpDo(t *testing.T, method, url string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > 0 {
		// As Alertmanager and `lavender phase` do.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func TestBridgeCommand(t *testing.T) {
	bark := newFakeBark(t)
	dir := barkConfigDir(t, map[string]string{"phone.bark.env": bark.URL + "/KEY/$0\n"})
	logDir := filepath.Join(t.TempDir(), "logs")
	base, logs := startBridge(t, "--bark.config-dir", dir, "--runlog.dir", logDir, "--bark.timeout=5s", "--bark.prefix=[box]")

	for _, path := range []string{"/-/healthy", "/-/ready", "/"} {
		if code, _ := httpDo(t, "GET", base+path, nil); code != 200 {
			t.Errorf("GET %s = %d", path, code)
		}
	}
	payload, err := os.ReadFile(filepath.Join("..", "..", "barkbridge", "testdata", "firing_swap_54.json"))
	if err != nil {
		t.Fatal(err)
	}
	code, answer := httpDo(t, "POST", base+"/webhook", payload)
	if code != 200 || answer != "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n" {
		t.Fatalf("POST /webhook = %d %q", code, answer)
	}
	// The id is the incident's, the group the host the alert is about.
	want := "/KEY/%5Bbox%5D%20swap%2054%25%20full%20%2816.3%2F32.0%20GB%29%20%E2%80%94%20consider%20intervening?level=passive&isArchive=0&id=1d33b2aa3d8b8b6a&group=gpu-box"
	if got := bark.requests(); len(got) != 1 || got[0] != want {
		t.Errorf("Bark got %q, want [%q]", got, want)
	}
	if code, _ := httpDo(t, "GET", base+"/webhook", nil); code != 405 {
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

	_, metrics := httpDo(t, "GET", base+"/metrics", nil)
	for _, m := range []string{
		`lavender_bark_pushes_total{result="ok",target="phone.bark.env:1"} 1`,
		`lavender_webhook_requests_total{code="200"} 1`,
		`lavender_webhook_requests_total{code="405"} 1`,
		`lavender_webhook_alerts_total{action="pushed",status="firing"} 1`,
		"lavender_bark_targets 1",
		"lavender_bark_push_duration_seconds_count 1",
		"lavender_build_info",
		"go_goroutines",
	} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	// A second phone, picked up by SIGHUP and by POST /-/reload.
	if err := os.WriteFile(filepath.Join(dir, "tablet.bark.env"), []byte(bark.URL+"/KEY/$0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	reloaded := false
	for range 100 {
		if _, m := httpDo(t, "GET", base+"/metrics", nil); strings.Contains(m, "lavender_bark_targets 2") {
			reloaded = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !reloaded {
		t.Errorf("SIGHUP did not reload; log:\n%s", logs)
	}
	os.WriteFile(filepath.Join(dir, "bad.bark.env"), []byte("https://x/KEY/\n"), 0o600)
	if code, body := httpDo(t, "POST", base+"/-/reload", nil); code != 500 || !strings.Contains(body, "bad.bark.env:1") {
		t.Errorf("POST /-/reload = %d %q", code, body)
	}
	os.Remove(filepath.Join(dir, "bad.bark.env"))
	if code, body := httpDo(t, "POST", base+"/-/reload", nil); code != 200 || body != "loaded 2 Bark targets\n" {
		t.Errorf("POST /-/reload = %d %q", code, body)
	}
}

func TestBridgeFlagErrors(t *testing.T) {
	dir := barkConfigDir(t, nil)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bark.timeout=0s"}, "--bark.timeout must be positive"},
		{[]string{"--bark.timeout=59s"}, "leaves no room"},
		{[]string{"--bark.threshold=1.5"}, "--bark.threshold must be in (0, 1]"},
		{[]string{"--webhook.max-bytes=0"}, "--webhook.max-bytes must be positive"},
		{[]string{"--bark.config-dir", filepath.Join(dir, "missing")}, "--bark.config-dir: stat "},
	}
	for _, tt := range tests {
		cli := parseCLI(t, append([]string{"bridge", "--web.listen-address=127.0.0.1:0", "--bark.config-dir", dir}, tt.args...)...)
		err := cli.Bridge.serve(t.Context(), &Globals{Logger: slog.New(slog.DiscardHandler), Stdout: io.Discard, Stderr: io.Discard}, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
}

func TestBarkFlagsConfig(t *testing.T) {
	cli := parseCLI(t, "bridge", "--bark.only-swap", "--bark.send-resolved", "--bark.dedup-window=10m",
		"--bark.swap-alertname=Swap", "--bark.threshold=0.7", "--webhook.max-bytes=2048")
	cfg := cli.Bridge.barkConfig(runlog.Options{Dir: "x"})
	if !cfg.OnlySwap || !cfg.SendResolved || cfg.DedupWindow != 10*time.Minute || cfg.SwapAlertname != "Swap" ||
		cfg.Threshold != 0.7 || cfg.MaxBodyBytes != 2048 || cfg.Timeout != 5*time.Second ||
		cfg.Prefix != "[lavender-2]" || cfg.ConfigDir == "" || cfg.Runlog.Dir != "x" {
		t.Errorf("config = %+v", cfg)
	}
}
