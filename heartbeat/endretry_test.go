package heartbeat

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
)

// restartableExporter serves env's phase server on one loopback address
// that it can stop and start again, as a restart of the exporter does.
type restartableExporter struct {
	t    *testing.T
	addr string
	h    http.Handler
	srv  *http.Server
}

func newRestartableExporter(t *testing.T, h http.Handler) *restartableExporter {
	x := &restartableExporter{t: t, addr: "127.0.0.1:0", h: h}
	x.start()
	return x
}

func (x *restartableExporter) start() {
	x.t.Helper()
	l, err := net.Listen("tcp", x.addr)
	if err != nil {
		x.t.Fatal(err)
	}
	x.addr = l.Addr().String()
	x.srv = &http.Server{Handler: x.h}
	go x.srv.Serve(l)
	srv := x.srv
	x.t.Cleanup(func() { srv.Close() })
}

func (x *restartableExporter) stop() { x.srv.Close() }

// endRun is a wrapped command that exits 0 once the test closes its stdin.
type endRun struct {
	logs  *testkit.SyncBuffer
	stdin io.WriteCloser
	sigc  chan os.Signal
	done  <-chan wrapperRun
}

// runUntilStarted runs `cat 0` as phase Train against url and returns
// once the exporter has taken its start. It sends no ping.
func runUntilStarted(t *testing.T, env *testEnv, url string, retry endRetry) *endRun {
	t.Helper()
	client, err := NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	r := &endRun{logs: &testkit.SyncBuffer{}, sigc: make(chan os.Signal, 1)}
	stdinR, stdinW := io.Pipe()
	r.stdin = stdinW
	w := &Wrapper{Client: client, Phase: "Train", Every: time.Hour, Stdin: stdinR, Stdout: io.Discard,
		Stderr: io.Discard, Logger: slog.New(slog.NewTextHandler(r.logs, nil)), Signals: r.sigc, endRetry: &retry}
	r.done = startWrapper(t, w, "cat 0")
	testkit.WaitFor(t, 20*time.Second, func() bool { p, ok := env.phase("Train"); return ok && p.Heartbeats >= 1 }, "the start")
	return r
}

const waitingLine = "waiting for it to take the phase's end"

// TestWrapperEndWaitsForARestartingExporter: the command exits 0 while the
// exporter restarts (connection refused). The wrapper says once that it
// waits, tries the end again until the exporter is back, and exits 0: the
// phase ends ok, with no death for the exporter to judge.
func TestWrapperEndWaitsForARestartingExporter(t *testing.T) {
	env := newTestEnv(t)
	mux := http.NewServeMux()
	env.e.Register(mux)
	x := newRestartableExporter(t, mux)
	r := runUntilStarted(t, env, "http://"+x.addr, endRetry{first: 10 * time.Millisecond, ceiling: 50 * time.Millisecond, budget: 20 * time.Second})
	x.stop()
	r.stdin.Close()
	testkit.WaitFor(t, 20*time.Second, func() bool { return strings.Contains(r.logs.String(), waitingLine) }, "the wrapper waiting")
	if p, _ := env.phase("Train"); !p.Active() {
		t.Fatalf("the phase ended before the exporter was back: %+v", p)
	}
	x.start()
	if res := waitResult(t, r.done); res.err != nil || res.code != 0 {
		t.Fatalf("Run = %d, %v; want 0", res.code, res.err)
	}
	if p, _ := env.phase("Train"); p.Status != phaseapi.StatusOK {
		t.Errorf("phase %s %q, want ok", p.Status, p.Reason)
	}
	logs := r.logs.String()
	if n := strings.Count(logs, "\n"); n != 1 || !strings.Contains(logs, "level=INFO") {
		t.Errorf("want one INFO line saying the wrapper waits, got:\n%s", logs)
	}
}

// TestWrapperEndRetriesA5xxNotA4xx: a 503 is the exporter away, tried
// again; a 4xx is an answer that stands, never tried again.
func TestWrapperEndRetriesA5xxNotA4xx(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		tries  int64
		status string
	}{
		{"503", http.StatusServiceUnavailable, 3, phaseapi.StatusOK},
		{"400", http.StatusBadRequest, 1, phaseapi.StatusActive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			mux := http.NewServeMux()
			env.e.Register(mux)
			var ends, refuse atomic.Int64
			refuse.Store(2)
			h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				body, _ := io.ReadAll(req.Body)
				req.Body = io.NopCloser(bytes.NewReader(body))
				if strings.Contains(string(body), `"event":"end"`) {
					ends.Add(1)
					if refuse.Add(-1) >= 0 {
						http.Error(w, `{"error":"not now"}`, tc.code)
						return
					}
				}
				mux.ServeHTTP(w, req)
			})
			x := newRestartableExporter(t, h)
			r := runUntilStarted(t, env, "http://"+x.addr, endRetry{first: 10 * time.Millisecond, ceiling: 50 * time.Millisecond, budget: 20 * time.Second})
			r.stdin.Close()
			if res := waitResult(t, r.done); res.err != nil || res.code != 0 {
				t.Fatalf("Run = %d, %v; want 0", res.code, res.err)
			}
			if got := ends.Load(); got != tc.tries {
				t.Errorf("%d tries of the end, want %d", got, tc.tries)
			}
			if p, _ := env.phase("Train"); p.Status != tc.status {
				t.Errorf("phase %s, want %s", p.Status, tc.status)
			}
		})
	}
}

// TestWrapperEndWaitIsBounded: an exporter that does not come back within
// the wait, or a signal to the wrapper while it waits, ends the wait: the
// wrapper says the end is lost and exits with the command's code.
func TestWrapperEndWaitIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget time.Duration
		signal bool
		says   string
	}{
		{"the exporter never comes back", 300 * time.Millisecond, false, "did not come back"},
		{"a signal while waiting", time.Hour, true, "stopped waiting for the exporter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			mux := http.NewServeMux()
			env.e.Register(mux)
			x := newRestartableExporter(t, mux)
			r := runUntilStarted(t, env, "http://"+x.addr, endRetry{first: 10 * time.Millisecond, ceiling: 50 * time.Millisecond, budget: tc.budget})
			x.stop()
			r.stdin.Close()
			if tc.signal {
				testkit.WaitFor(t, 20*time.Second, func() bool { return strings.Contains(r.logs.String(), waitingLine) }, "the wrapper waiting")
				r.sigc <- syscall.SIGINT
			}
			if res := waitResult(t, r.done); res.err != nil || res.code != 0 {
				t.Fatalf("Run = %d, %v; want 0", res.code, res.err)
			}
			if logs := r.logs.String(); !strings.Contains(logs, tc.says) || strings.Count(logs, "level=WARN") != 1 {
				t.Errorf("want one warning saying %q, got:\n%s", tc.says, logs)
			}
		})
	}
}
