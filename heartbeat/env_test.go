package heartbeat

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/phaseserver"
	"github.com/lavender-ml/lavender/runlog"
)

// The client and the wrapper are tested against the real exporter's API on
// loopback (tests may import it: the layer rule counts no tests).

// t0 is 2026-11-29 12:00:00 UTC, the exporter tests' clock.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type testEnv struct {
	t   testing.TB
	dir string
	e   *phaseserver.Server
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	clock := testkit.NewClock(t0)
	dir := t.TempDir()
	e := phaseserver.New(phaseserver.Config{ProcFS: t.TempDir(), Runlog: runlog.Options{Dir: dir}, Clock: clock.Now}, slog.New(slog.DiscardHandler))
	return &testEnv{t: t, dir: dir, e: e}
}

func (env *testEnv) server() *httptest.Server {
	mux := http.NewServeMux()
	env.e.Register(mux)
	srv := httptest.NewServer(mux)
	env.t.Cleanup(srv.Close)
	return srv
}

func (env *testEnv) phase(name string) (phaseapi.Phase, bool) {
	_, phases := env.e.Snapshot()
	for _, p := range phases {
		if p.Name == name {
			return p, true
		}
	}
	return phaseapi.Phase{}, false
}

// entries returns the current run log's entries without their time stamps.
func (env *testEnv) entries() []string { return runlogtest.Entries(env.t, env.dir) }

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n") && len(a) == len(b)
}

func newAuthServer(t *testing.T, user, pass *string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*user, *pass, _ = r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"name":"A","status":"active"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
