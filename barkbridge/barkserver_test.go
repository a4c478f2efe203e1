package barkbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lavender/runlog"
)

// Timeouts of the test bridges. Nothing asserts on timing: hangTimeout
// keeps the cases that wait on a hanging Bark short, and every other case
// gets a timeout it never comes near, so a loaded CI machine (or -race on a
// TLS handshake) cannot turn a success into a "timeout".
const (
	hangTimeout    = 200 * time.Millisecond
	relaxedTimeout = 10 * time.Second
)

// barkServer behaves like bark-server (Finb/bark-server) as far as the
// bridge can tell: it routes on the raw path without unescaping it, then
// query-unescapes title, subtitle and body, and answers Bark's JSON.
type barkServer struct {
	*httptest.Server
	key string

	mu      sync.Mutex
	mode    string // "ok", "status:NNN", "code:NNN" (HTTP 200, JSON code NNN), "hang", "text", "redirect:URL"
	pushes  []barkPush
	release chan struct{}
}

// barkPush is one request as the server saw it.
type barkPush struct {
	RequestURI             string
	Title, Subtitle, Body  string
	Level, IsArchive, Path string
	Referer                string
}

func newBarkServer(t testing.TB, key string) *barkServer {
	t.Helper()
	s := &barkServer{key: key, mode: "ok", release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.release)
		s.Close()
	})
	return s
}

func (s *barkServer) setMode(mode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = mode
}

func (s *barkServer) received() []barkPush {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]barkPush(nil), s.pushes...)
}

// template is a target line for this server: "<url>/<key>/$0".
func (s *barkServer) template() string { return s.URL + "/" + s.key + "/$0" }

func writeJSON(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"code": code, "message": msg, "timestamp": time.Now().Unix()})
}

func (s *barkServer) serve(w http.ResponseWriter, r *http.Request) {
	rawPath, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	segs := strings.Split(strings.TrimPrefix(rawPath, "/"), "/")
	p := barkPush{RequestURI: r.RequestURI, Path: rawPath, Referer: r.Header.Get("Referer")}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		writeJSON(w, 400, "bad query")
		return
	}
	p.Level, p.IsArchive = q.Get("level"), q.Get("isArchive")
	var parts []*string
	switch len(segs) {
	case 2:
		parts = []*string{&p.Body}
	case 3:
		parts = []*string{&p.Title, &p.Body}
	case 4:
		parts = []*string{&p.Title, &p.Subtitle, &p.Body}
	default:
		writeJSON(w, 404, "Cannot GET "+rawPath)
		return
	}
	for i, dst := range parts {
		v, err := url.QueryUnescape(segs[i+1])
		if err != nil {
			writeJSON(w, 400, "url unescape failed")
			return
		}
		*dst = v
	}
	s.mu.Lock()
	s.pushes = append(s.pushes, p)
	mode := s.mode
	s.mu.Unlock()
	if segs[0] != s.key {
		// bark-server's wording, which names the key: the bridge must not repeat it.
		writeJSON(w, 400, fmt.Sprintf("failed to get device token: device key %s not found", segs[0]))
		return
	}
	var code int
	switch {
	case mode == "ok":
		writeJSON(w, 200, "success")
	case mode == "text":
		io.WriteString(w, "ok")
	case mode == "hang":
		select {
		case <-r.Context().Done():
		case <-s.release:
		}
	case strings.HasPrefix(mode, "status:"):
		fmt.Sscanf(mode, "status:%d", &code)
		writeJSON(w, code, "push failed: APNs refused "+s.key)
	case mode == "apns500":
		// bark-server's answer when APNs refuses: it quotes the device token.
		writeJSON(w, 500, `push failed: Post "https://api.push.apple.com/3/device/`+apnsTestToken+`": remote error`)
	case strings.HasPrefix(mode, "redirect:"):
		http.Redirect(w, r, strings.TrimPrefix(mode, "redirect:")+r.URL.Path, http.StatusFound)
	case strings.HasPrefix(mode, "code:"):
		fmt.Sscanf(mode, "code:%d", &code)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"code": code, "message": "push failed"})
	}
}

// apnsTestToken is a device token as APNs issues them: 64 hex characters.
const apnsTestToken = "5f1c0e9a7b3d2c4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"

// closedURL is an http URL on a loopback port that nothing listens on.
func closedURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// syncBuffer is a log sink safe for the concurrent pushes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fixture is a bridge wired to temp dirs, a debug logger and its own registry.
type fixture struct {
	t      testing.TB
	dir    string
	logs   *syncBuffer
	reg    *prometheus.Registry
	bridge *Bridge
	mux    *http.ServeMux
	cfg    Config
}

// writeTargets writes one *.bark.env file per entry, mode 0600.
func writeTargets(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func newFixture(t testing.TB, files map[string]string, tweak func(*Config)) *fixture {
	t.Helper()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "bark")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeTargets(t, dir, files)
	f := &fixture{t: t, dir: dir, logs: &syncBuffer{}, reg: prometheus.NewRegistry(), mux: http.NewServeMux()}
	f.cfg = Config{
		ConfigDir: dir,
		Timeout:   relaxedTimeout,
		Runlog:    runlog.Options{Dir: filepath.Join(tmp, "logs")},
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

// post sends body to /webhook and returns the status and answer.
func (f *fixture) post(body []byte) (int, string) {
	f.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// runlogEntries returns the current run's entries without their times.
func (f *fixture) runlogEntries() []string {
	f.t.Helper()
	l, err := runlog.Current(f.cfg.Runlog)
	if err != nil {
		return nil
	}
	data, err := l.Read()
	if err != nil {
		f.t.Fatal(err)
	}
	pf, err := runlog.Parse(data)
	if err != nil {
		f.t.Fatalf("run log does not parse: %v\n%s", err, data)
	}
	var out []string
	for _, e := range pf.AllEntries() {
		out = append(out, e[len("15:04:05 "):])
	}
	return out
}

// barkLines returns the run log's BARK entries.
func (f *fixture) barkLines() []string {
	var out []string
	for _, e := range f.runlogEntries() {
		if strings.HasPrefix(e, "BARK ") {
			out = append(out, e)
		}
	}
	return out
}

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

// metricValue sums the samples of name whose labels include want.
func metricValue(t testing.TB, reg prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func gauge(t testing.TB, reg prometheus.Gatherer, name string) float64 {
	return metricValue(t, reg, name, nil)
}

func countSeries(t testing.TB, reg prometheus.Gatherer, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}
