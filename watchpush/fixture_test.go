package watchpush

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/pushtext"
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
	bridge *delivery.Pipeline
	pusher *Pusher
	cfg    fixtureConfig
}

// fixtureConfig is the pipeline's and the pusher's configuration in one,
// as the commands set them from one set of flags.
type fixtureConfig struct {
	delivery.Config
	Hostname string
	Levels   Levels
}

func newFixture(t testing.TB, files map[string]string, tweak func(*fixtureConfig)) *fixture {
	t.Helper()
	dir := barktest.ConfigDir(t, files)
	f := &fixture{t: t, dir: dir, logs: &testkit.SyncBuffer{}, reg: prometheus.NewRegistry()}
	f.cfg = fixtureConfig{Config: delivery.Config{
		ConfigDir: dir,
		Timeout:   relaxedTimeout,
		Prefix:    pushtext.DefaultPrefix,
		Runlog:    runlog.Options{Dir: filepath.Join(t.TempDir(), "logs")},
	}}
	if tweak != nil {
		tweak(&f.cfg)
	}
	logger := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := delivery.New(f.cfg.Config, logger, f.reg)
	if err != nil {
		t.Fatalf("delivery.New: %v", err)
	}
	t.Cleanup(b.Close)
	f.bridge = b
	f.pusher = New(Config{Prefix: f.cfg.Prefix, Hostname: f.cfg.Hostname, Levels: f.cfg.Levels}, b)
	return f
}

// barkLines returns the run log's BARK entries.
func (f *fixture) barkLines() []string { return runlogtest.BarkLines(f.t, f.cfg.Runlog.Dir) }

const bytesPerGiB = 1 << 30

func giBytes(f float64) uint64 { return uint64(f * bytesPerGiB) }

func newTestClock() *testkit.Clock { return testkit.NewClock(pushedAt) }
