package delivery

import (
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

// Timeouts of the test bridges. Nothing asserts on timing: hangTimeout
// keeps the cases that wait on a hanging Bark short, and every other case
// gets a timeout it never comes near, so a loaded CI machine (or -race on a
// TLS handshake) cannot turn a success into a "timeout".
const (
	hangTimeout    = 200 * time.Millisecond
	relaxedTimeout = 10 * time.Second
)

// fixture is a bridge wired to temp dirs, a debug logger and its own registry.
type fixture struct {
	t      testing.TB
	dir    string
	logs   *testkit.SyncBuffer
	reg    *prometheus.Registry
	bridge *Pipeline
	mux    *http.ServeMux
	cfg    Config
}

func newFixture(t testing.TB, files map[string]string, tweak func(*Config)) *fixture {
	t.Helper()
	dir := barktest.ConfigDir(t, files)
	f := &fixture{t: t, dir: dir, logs: &testkit.SyncBuffer{}, reg: prometheus.NewRegistry(), mux: http.NewServeMux()}
	f.cfg = Config{
		ConfigDir: dir,
		Timeout:   relaxedTimeout,
		Runlog:    runlog.Options{Dir: filepath.Join(t.TempDir(), "logs")},
	}
	if tweak != nil {
		tweak(&f.cfg)
	}
	logger := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(f.cfg, logger, f.reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.bridge = b
	b.Register(f.mux)
	return f
}

// send pushes text, as a watchdog push of one event, and returns its
// outcome.
func (f *fixture) send(subject, text string) *Push {
	f.t.Helper()
	p := NewPush(subject, text)
	p.Storm = []StormEvent{WordedEvent(subject, false)}
	f.bridge.Send(f.t.Context(), []*Push{p})
	f.bridge.Record(p)
	return p
}

// metrics reads the bridge's registry.
func (f *fixture) metrics() testkit.Metrics {
	f.t.Helper()
	m, err := testkit.GatherMetrics(f.reg)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}
