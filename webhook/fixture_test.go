package webhook

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/runlog"
	"github.com/lavender-ml/lavender/watchdog"
	"github.com/lavender-ml/lavender/watchpush"
)

// Timeouts of the test bridges. Nothing asserts on timing: hangTimeout
// keeps the cases that wait on a hanging Bark short, and every other case
// gets a timeout it never comes near, so a loaded CI machine (or -race on a
// TLS handshake) cannot turn a success into a "timeout".
const (
	hangTimeout    = 200 * time.Millisecond
	relaxedTimeout = 10 * time.Second
)

// fixtureRetry is the test bridges' retry stage: three tries a millisecond
// apart, so a failing Bark stand-in sees a known number of requests at
// once, whatever the machine's speed.
var fixtureRetry = delivery.Retry{First: time.Millisecond, Max: time.Millisecond, Tries: 3}

// fixture is a bridge wired to temp dirs, a debug logger and its own registry.
type fixture struct {
	t      testing.TB
	dir    string
	logs   *testkit.SyncBuffer
	reg    *prometheus.Registry
	bridge *delivery.Pipeline
	hook   *Handler
	pusher *watchpush.Pusher // the watchdog's pushes, through the same pipeline
	mux    *http.ServeMux
	cfg    fixtureConfig
}

// fixtureConfig is the pipeline's, the webhook's and the watchdog pusher's
// configuration in one, as the commands set them from one set of flags.
type fixtureConfig struct {
	delivery.Config
	Threshold     float64
	SwapAlertname string
	OnlySwap      bool
	SendResolved  bool
	MaxBodyBytes  int64
	Hostname      string
	Levels        watchpush.Levels
}

func (c fixtureConfig) webhook() Config {
	return Config{Timeout: c.Timeout, Prefix: c.Prefix, Threshold: c.Threshold, SwapAlertname: c.SwapAlertname,
		OnlySwap: c.OnlySwap, SendResolved: c.SendResolved, MaxBodyBytes: c.MaxBodyBytes}
}

func newFixture(t testing.TB, files map[string]string, tweak func(*fixtureConfig)) *fixture {
	t.Helper()
	dir := barktest.ConfigDir(t, files)
	f := &fixture{t: t, dir: dir, logs: &testkit.SyncBuffer{}, reg: prometheus.NewRegistry(), mux: http.NewServeMux()}
	f.cfg = fixtureConfig{Config: delivery.Config{
		ConfigDir: dir,
		Timeout:   relaxedTimeout,
		Retry:     fixtureRetry,
		Prefix:    pushtext.DefaultPrefix,
		Runlog:    runlog.Options{Dir: filepath.Join(t.TempDir(), "logs")},
	}}
	if tweak != nil {
		tweak(&f.cfg)
	}
	logger := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.open(logger)
	return f
}

// open builds the pipeline, the webhook and the pusher from f.cfg.
func (f *fixture) open(logger *slog.Logger) {
	f.t.Helper()
	b, err := delivery.New(f.cfg.Config, logger, f.reg)
	if err != nil {
		f.t.Fatalf("delivery.New: %v", err)
	}
	h, err := New(f.cfg.webhook(), b, logger, f.reg)
	if err != nil {
		b.Close()
		f.t.Fatalf("webhook.New: %v", err)
	}
	f.bridge, f.hook = b, h
	f.pusher = watchpush.New(watchpush.Config{Prefix: f.cfg.Prefix, Hostname: f.cfg.Hostname, Levels: f.cfg.Levels}, b)
	f.mux = http.NewServeMux()
	h.Register(f.mux)
	b.Register(f.mux)
}

// post sends body to /webhook and returns the status and answer.
func (f *fixture) post(body []byte) (int, string) {
	f.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// runlogEntries returns the current run's entries without their times.
func (f *fixture) runlogEntries() []string { return runlogtest.Entries(f.t, f.cfg.Runlog.Dir) }

// barkLines returns the run log's BARK entries.
func (f *fixture) barkLines() []string { return runlogtest.BarkLines(f.t, f.cfg.Runlog.Dir) }

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// do sends an empty request to path on the fixture's mux.
func (f *fixture) do(method, path string) (int, string) {
	f.t.Helper()
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Code, rec.Body.String()
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

// sortedBodies are the bodies of every push srv received, sorted: the
// pushes of one webhook go out in parallel, in no fixed order.
func sortedBodies(srv *barktest.Server) []string {
	var bodies []string
	for _, p := range srv.Pushes() {
		bodies = append(bodies, p.Body)
	}
	slices.Sort(bodies)
	return bodies
}

// openHandler is a webhook handler over a pipeline of its own, configured
// by c, with no registry: for benchmarks and fuzzing, which need no
// fixture. The pipeline closes with tb.
func openHandler(tb testing.TB, c fixtureConfig, logger *slog.Logger) (*Handler, *delivery.Pipeline) {
	tb.Helper()
	d, err := delivery.New(c.Config, logger, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.Close)
	h, err := New(c.webhook(), d, logger, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return h, d
}

// pushedAt is when the tests' watchdog alerts are raised.
var pushedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// swapAlert is the swap rule's firing alert at ratio, with byte figures:
// a watchdog push through the same pipeline as the webhook's.
func swapAlert(ratio float64, used, total uint64) watchdog.Alert {
	return watchdog.Alert{Rule: watchdog.RuleSwap, Status: watchdog.Firing, Began: pushedAt, At: pushedAt,
		Sample: watchdog.Sample{Swap: watchdog.Swap{Ratio: ratio, UsedBytes: used, TotalBytes: total}}}
}

func pressureAlert(some float64, swap watchdog.Swap) watchdog.Alert {
	return watchdog.Alert{Rule: watchdog.RulePressure, Status: watchdog.Firing, Began: pushedAt, At: pushedAt,
		Sample: watchdog.Sample{Swap: swap, Pressure: watchdog.Pressure{Available: true, Some: some, Full: some}}}
}

func oomAlert(kills uint64, victim watchdog.Victim, phase string, swap watchdog.Swap) watchdog.Alert {
	return watchdog.Alert{Rule: watchdog.RuleOOM, Status: watchdog.Firing, Began: pushedAt, At: pushedAt, Kills: kills, Victim: victim, Phase: phase,
		Sample: watchdog.Sample{Swap: swap, OOM: watchdog.OOM{Available: true, Kills: 7, Victim: victim}}}
}

// planPushes plans msg and builds every alert's push at once, as
// deliverInChunks builds them a chunk at a time.
func planPushes(b *Handler, msg *WebhookMessage) []planned {
	plans := b.plan(msg)
	for i := range plans {
		plans[i].delivery = b.planPush(msg, plans[i])
	}
	return plans
}
