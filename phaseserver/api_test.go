package phaseserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
)

func (env *testEnv) server() *httptest.Server {
	mux := http.NewServeMux()
	env.e.Register(mux)
	mux.Handle("/metrics", promhttp.HandlerFor(env.reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	env.t.Cleanup(srv.Close)
	return srv
}

func request(t *testing.T, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

func TestAPI(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()

	code, _, body := request(t, http.MethodGet, srv.URL+phaseapi.PhasesPath, "")
	if code != http.StatusOK || string(body) != `{"run":null,"phases":[]}`+"\n" {
		t.Fatalf("phases before any run: %d %s", code, body)
	}

	code, hdr, body := request(t, http.MethodPost, srv.URL+phaseapi.RunsPath, `{"header":"device=cuda lavender_2=v0.2.3"}`)
	if code != http.StatusCreated || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("POST runs: %d %s", code, body)
	}
	var run phaseapi.RunResponse
	if err := json.Unmarshal(body, &run); err != nil || run.Run.File != "run-20261129-120000.log" || !run.Run.Started.Equal(t0) {
		t.Fatalf("POST runs answered %s (%v)", body, err)
	}
	if strings.Contains(string(body), env.dir) {
		t.Errorf("answer leaks the server's path: %s", body)
	}

	code, _, body = request(t, http.MethodPost, srv.URL+phaseapi.HeartbeatPath, `{"phase":"Pretrain 1/3","event":"start"}`)
	if code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	env.clock.Advance(90 * time.Second)
	code, _, body = request(t, http.MethodPost, srv.URL+phaseapi.HeartbeatPath, `{"phase":"Pretrain 1/3","event":"end","status":"failed"}`)
	want := `{"name":"Pretrain 1/3","status":"failed","started":"2026-11-29T12:00:00Z","last_heartbeat":"2026-11-29T12:01:30Z","ended":"2026-11-29T12:01:30Z","heartbeats":2,"duration_seconds":90,"failures":1,"last_failure":{"started":"2026-11-29T12:00:00Z","ended":"2026-11-29T12:01:30Z"}}` + "\n"
	if code != http.StatusOK || string(body) != want {
		t.Fatalf("end: %d %s\nwant %s", code, body, want)
	}
	code, _, body = request(t, http.MethodGet, srv.URL+phaseapi.PhasesPath, "")
	var phases phaseapi.PhasesResponse
	if err := json.Unmarshal(body, &phases); err != nil || code != 200 || phases.Run == nil || len(phases.Phases) != 1 || phases.Phases[0].Status != phaseapi.StatusFailed {
		t.Fatalf("phases: %d %s", code, body)
	}
	want2 := []string{"RUN start", "START Pretrain 1/3", "END   Pretrain 1/3 90s failed"}
	if got := env.entries(); !equalStrings(got, want2) {
		t.Errorf("entries %q, want %q", got, want2)
	}

	// An empty body starts a run without a header.
	env.clock.Advance(time.Second)
	if code, _, body := request(t, http.MethodPost, srv.URL+phaseapi.RunsPath, ""); code != http.StatusCreated {
		t.Errorf("POST runs without a body: %d %s", code, body)
	}
}

func TestAPIBadRequests(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.beat("Done", phaseapi.EventStart, "")
	env.beat("Done", phaseapi.EventEnd, "")
	huge := `{"phase":"Pretrain","event":"ping","pad":"` + strings.Repeat("x", phaseapi.MaxRequestBytes) + `"}`

	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		allow                    string
	}{
		{"malformed JSON", "POST", phaseapi.HeartbeatPath, `{"phase":"Pretrain",`, 400, ""},
		{"not an object", "POST", phaseapi.HeartbeatPath, `["Pretrain","ping"]`, 400, ""},
		{"wrong type", "POST", phaseapi.HeartbeatPath, `{"phase":7,"event":"ping"}`, 400, ""},
		{"trailing data", "POST", phaseapi.HeartbeatPath, `{"phase":"Pretrain","event":"ping"} {"phase":"x","event":"start"}`, 400, ""},
		{"empty body", "POST", phaseapi.HeartbeatPath, ``, 400, ""},
		{"invalid UTF-8", "POST", phaseapi.HeartbeatPath, "{\"phase\":\"Pre\xfftrain\",\"event\":\"start\"}", 400, ""},
		{"unknown event", "POST", phaseapi.HeartbeatPath, `{"phase":"Pretrain","event":"finish"}`, 400, ""},
		{"empty name", "POST", phaseapi.HeartbeatPath, `{"phase":"  ","event":"start"}`, 400, ""},
		{"long name", "POST", phaseapi.HeartbeatPath, `{"phase":"` + strings.Repeat("p", 65) + `","event":"start"}`, 400, ""},
		{"control character", "POST", phaseapi.HeartbeatPath, `{"phase":"Pre\u0000train","event":"start"}`, 400, ""},
		{"bad status", "POST", phaseapi.HeartbeatPath, `{"phase":"Pretrain","event":"end","status":"oom"}`, 400, ""},
		{"status without end", "POST", phaseapi.HeartbeatPath, `{"phase":"Pretrain","event":"ping","status":"ok"}`, 400, ""},
		{"end never started", "POST", phaseapi.HeartbeatPath, `{"phase":"Eval","event":"end"}`, 404, ""},
		{"end twice", "POST", phaseapi.HeartbeatPath, `{"phase":"Done","event":"end"}`, 409, ""},
		{"body over 64 KiB", "POST", phaseapi.HeartbeatPath, huge, 413, ""},
		{"runs body over 64 KiB", "POST", phaseapi.RunsPath, huge, 413, ""},
		{"runs malformed", "POST", phaseapi.RunsPath, `{"header":`, 400, ""},
		{"GET heartbeat", "GET", phaseapi.HeartbeatPath, "", 405, "POST"},
		{"PUT runs", "PUT", phaseapi.RunsPath, `{}`, 405, "POST"},
		{"POST phases", "POST", phaseapi.PhasesPath, `{}`, 405, "GET, HEAD"},
		{"DELETE phases", "DELETE", phaseapi.PhasesPath, "", 405, "GET, HEAD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshotState(t, env)
			code, hdr, body := request(t, tc.method, srv.URL+tc.path, tc.body)
			if code != tc.code {
				t.Errorf("status %d, want %d (%s)", code, tc.code, body)
			}
			var e map[string]string
			if err := json.Unmarshal(body, &e); err != nil || len(e) != 1 || e["error"] == "" {
				t.Errorf("body %s is not {\"error\":\"...\"}", body)
			}
			if hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("Content-Type %q, X-Content-Type-Options %q: a browser must never sniff an answer quoting the request as HTML",
					hdr.Get("Content-Type"), hdr.Get("X-Content-Type-Options"))
			}
			if got := hdr.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
			if after := snapshotState(t, env); after != before {
				t.Errorf("state changed:\n%s\nwant\n%s", after, before)
			}
		})
	}
}

// Lavender's own bodies are read strictly: a misspelt, case-variant or
// repeated key, or a lone surrogate, is a 400 that names the problem and
// changes nothing, so a typo never passes. encoding/json would ignore the
// typo, match "Event" to event with the last key winning, and turn \ud800
// into U+FFFD.
func TestAPIStrictJSON(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	env.beat("Pretrain", phaseapi.EventStart, "")
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"misspelt status", phaseapi.HeartbeatPath, `{"phase":"Pretrain","event":"end","staus":"failed"}`, `unknown field "staus"`},
		{"misspelt header", phaseapi.RunsPath, `{"headr":"x"}`, `unknown field "headr"`},
		{"case variant after the key", phaseapi.HeartbeatPath, `{"phase":"Pretrain","event":"ping","Event":"bogus"}`, `unknown field "Event"`},
		{"case variant alone", phaseapi.HeartbeatPath, `{"Phase":"Pretrain","event":"ping"}`, `unknown field "Phase"`},
		{"duplicate key", phaseapi.HeartbeatPath, `{"phase":"Pretrain","event":"ping","event":"end"}`, `duplicate field "event"`},
		{"duplicate header", phaseapi.RunsPath, `{"header":"a","header":"b"}`, `duplicate field "header"`},
		{"lone surrogate", phaseapi.HeartbeatPath, `{"phase":"Pre\ud800train","event":"start"}`, `surrogate`},
		{"nested unknown", phaseapi.HeartbeatPath, `{"phase":"Pretrain","event":"ping","x":{"y":1}}`, `unknown field "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshotState(t, env)
			code, _, body := request(t, http.MethodPost, srv.URL+tc.path, tc.body)
			var e phaseapi.ErrorResponse
			if err := json.Unmarshal(body, &e); err != nil || code != http.StatusBadRequest || !strings.Contains(e.Error, tc.want) {
				t.Errorf("%s: %d %s, want 400 naming %s", tc.body, code, body, tc.want)
			}
			if after := snapshotState(t, env); after != before {
				t.Errorf("state changed:\n%s\nwant\n%s", after, before)
			}
		})
	}
}

// The 65th active phase is refused over HTTP with 409 and a clear message.
func TestAPIPhaseCap(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	for i := range maxPhases {
		env.beat(strings.Repeat("a", i+1), phaseapi.EventStart, "")
	}
	code, _, body := request(t, http.MethodPost, srv.URL+phaseapi.HeartbeatPath, `{"phase":"one more","event":"start"}`)
	if code != http.StatusConflict || !strings.Contains(string(body), "all 64 phases") {
		t.Errorf("65th phase: %d %s", code, body)
	}
}

// busyEnv is a server with phases in every state: active, ended ok and
// ended failed (n phases in all, n >= 3).
func busyEnv(t testing.TB, n int) (*testEnv, *prometheus.Registry) {
	env := newTestEnv(t)
	if _, err := env.e.StartRun("device=cuda", ""); err != nil {
		t.Fatal(err)
	}
	env.beat("Warmup", phaseapi.EventStart, "")
	env.beat("Eval", phaseapi.EventStart, "")
	env.clock.Advance(time.Minute)
	env.beat("Warmup", phaseapi.EventEnd, phaseapi.StatusFailed)
	env.beat("Eval", phaseapi.EventEnd, phaseapi.StatusOK)
	for i := 3; i <= n; i++ {
		env.beat(fmt.Sprintf("Pretrain %d/%d", i-2, n-2), phaseapi.EventStart, "")
	}
	return env, env.reg
}

func TestGatherAndLint(t *testing.T) {
	_, reg := busyEnv(t, 3)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	// Every metric of the contract is there.
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n < 20 {
		t.Errorf("%d samples (%v)", n, err)
	}
}

// promtool check metrics on a real scrape over HTTP, with the Go and
// process collectors that `lavender exporter` adds.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := testkit.NeedTool(t, "prometheus", "promtool")
	env, reg := busyEnv(t, 3)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := env.server()
	code, _, scrape := request(t, http.MethodGet, srv.URL+"/metrics", "")
	if code != 200 {
		t.Fatalf("scrape: %d", code)
	}
	for _, name := range []string{"lavender_phase_active", "lavender_run_start_timestamp_seconds", "lavender_heartbeats_refused_total", "lavender_proc_hides_processes"} {
		if !bytes.Contains(scrape, []byte(name)) {
			t.Errorf("scrape lacks %s", name)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func BenchmarkScrape(b *testing.B) {
	for _, full := range []bool{false, true} {
		name := "lavender"
		if full {
			name = "with_go_process"
		}
		b.Run(name, func(b *testing.B) {
			env, _ := busyEnv(b, 8)
			if full {
				env.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			}
			h := promhttp.HandlerFor(env.reg, promhttp.HandlerOpts{})
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			var size int
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}
