package delivery

import (
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// incidentStart is when the tests' incidents begin; a fixed instant, so no
// test depends on the wall clock's date.
var incidentStart = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newTestClock() *testkit.Clock { return testkit.NewClock(incidentStart) }

// stateFixture is a pipeline with a state file, a clock and storm control
// at one push a minute, which can be restarted as after a crash.
type stateFixture struct {
	*fixture
	srv   *barktest.Server
	clock *testkit.Clock
	path  string
}

func newStateFixture(t *testing.T) *stateFixture {
	t.Helper()
	srv := barktest.New(t)
	clock := newTestClock()
	path := filepath.Join(t.TempDir(), "logs", StateFileName)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *Config) {
		c.Now, c.MaxPerMinute, c.StateFile, c.Prefix = clock.Now, 1, path, "[lavender-2]"
	})
	sf := &stateFixture{fixture: f, srv: srv, clock: clock, path: path}
	t.Cleanup(func() { sf.bridge.Close() })
	return sf
}

// restart builds a new pipeline from the same config, files and clock, as
// a process started after the last one died: nothing is carried over but
// the files.
func (f *stateFixture) restart() {
	f.t.Helper()
	f.bridge.Close() // as the process's death releases its lock
	f.logs, f.reg = &testkit.SyncBuffer{}, prometheus.NewRegistry()
	b, err := New(f.cfg, slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})), f.reg)
	if err != nil {
		f.t.Fatalf("New after a restart: %v", err)
	}
	f.bridge = b
	f.mux = http.NewServeMux()
	b.Register(f.mux)
}

// postAlerts sends alerts from…to-1, each a new incident of one alert, as
// the webhook hands them over, and returns their actions.
func (f *stateFixture) postAlerts(from, to int) []string {
	f.t.Helper()
	var actions []string
	for i := from; i < to; i++ {
		p := NewPush("SwapUsageHigh", "[lavender-2] SwapUsageHigh")
		p.Key = &Key{Incident: AlertIncident(fmt.Sprintf("%016x", i+1), incidentStart.Add(time.Duration(i)*time.Second).UnixNano()), Status: "firing"}
		p.Storm = []StormEvent{AlertEvent("SwapUsageHigh", false)}
		f.bridge.Send(f.t.Context(), []*Push{p})
		f.bridge.Record(p)
		actions = append(actions, p.Action())
	}
	return actions
}
