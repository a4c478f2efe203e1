package testkit

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/procfs"
	"go.yaml.in/yaml/v2"
	"golang.org/x/crypto/bcrypt"
)

// fatalRecorder is a testing.TB whose Fatal ends only the goroutine it
// runs in and keeps the message, to test how the helpers fail.
type fatalRecorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *fatalRecorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// fails runs f with a recorder and returns its Fatal message ("" if none).
func fails(t *testing.T, f func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprintf(&b, "%d\n", i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "\n"); got != 800 || b.Len() != 1600 {
		t.Errorf("%d lines, %d bytes; want 800 and 1600", got, b.Len())
	}
	b.Reset()
	if b.String() != "" {
		t.Error("Reset left bytes")
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, 30*time.Second, func() bool { n++; return n == 3 }, "three looks")
	if n != 3 {
		t.Errorf("looked %d times", n)
	}
	msg := fails(t, func(tb testing.TB) {
		WaitFor(tb, 20*time.Millisecond, func() bool { return false }, "the impossible")
	})
	if msg != "gave up after 20ms waiting for the impossible" {
		t.Errorf("failure message %q", msg)
	}
}

// TestProcfsReadsAsTheKernelWrites: prometheus/procfs, node_exporter's
// parser, reads the fake files back as the figures they were made from,
// before and after an update.
func TestProcfsReadsAsTheKernelWrites(t *testing.T) {
	psi := &PSI{SomeAvg10: 12.5, SomeAvg60: 3.25, SomeAvg300: 1, SomeTotal: 58761459, FullAvg10: 0.23, FullTotal: 58464525}
	p := NewProcfs(t, Host{Swap: SwapAt(Swap32GiBinKB, 0.54), OOMKills: 2, PSI: psi})
	check := func(h Host) {
		t.Helper()
		fs, err := procfs.NewFS(p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		mi, err := fs.Meminfo()
		if err != nil {
			t.Fatal(err)
		}
		if *mi.SwapTotal != h.Swap.TotalKB || *mi.SwapTotal-*mi.SwapFree != h.Swap.UsedKB || *mi.MemTotal != 65536000 {
			t.Errorf("meminfo swap %d/%d kB, want %+v", *mi.SwapTotal-*mi.SwapFree, *mi.SwapTotal, h.Swap)
		}
		vmstat, err := os.ReadFile(filepath.Join(p.Dir, "vmstat"))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("\noom_kill %d\n", h.OOMKills); !strings.Contains(string(vmstat), want) {
			t.Errorf("vmstat %q lacks %q", vmstat, want)
		}
		stats, err := fs.PSIStatsForResource("memory")
		if h.PSI == nil {
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("no PSI: reading pressure/memory gave %v, want not-exist", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if stats.Some.Avg10 != h.PSI.SomeAvg10 || stats.Some.Avg60 != h.PSI.SomeAvg60 || stats.Some.Total != h.PSI.SomeTotal ||
			stats.Full.Avg10 != h.PSI.FullAvg10 || stats.Full.Total != h.PSI.FullTotal {
			t.Errorf("pressure/memory read back as some %+v full %+v, want %+v", *stats.Some, *stats.Full, *h.PSI)
		}
	}
	check(p.Host())
	if s := p.Host().Swap; s.UsedBytes() != s.UsedKB*1024 || math.Abs(s.Ratio()-0.54) > 1e-6 {
		t.Errorf("swap figures %+v ratio %v", s, s.Ratio())
	}

	p.SetSwap(SwapAt(Swap32GiBinKB, 0.9))
	p.SetOOMKills(3)
	psi.SomeAvg10 = 40 // SetPSI copies: this change must not leak in
	p.SetPSI(&PSI{SomeAvg10: 61, SomeTotal: 1, FullAvg10: 60.5, FullTotal: 2})
	if got := p.Host().PSI.SomeAvg10; got != 61 {
		t.Errorf("SomeAvg10 %v after SetPSI", got)
	}
	check(p.Host())
	p.SetPSI(nil)
	check(p.Host())

	if msg := fails(t, func(tb testing.TB) { NewProcfs(tb, Host{Swap: Swap{TotalKB: 1, UsedKB: 2}}) }); !strings.Contains(msg, "exceeds total") {
		t.Errorf("impossible swap: %q", msg)
	}
}

const exposition = `# HELP lavender_bark_pushes_total Pushes.
# TYPE lavender_bark_pushes_total counter
lavender_bark_pushes_total{result="failed",target="phone.bark.env:1"} 1
lavender_bark_pushes_total{result="ok",target="phone.bark.env:1"} 3
lavender_bark_pushes_total{result="ok",target="tablet.bark.env:1"} 4
# TYPE lavender_swap_used_ratio gauge
lavender_swap_used_ratio 0.54
# TYPE lavender_bark_push_duration_seconds histogram
lavender_bark_push_duration_seconds_bucket{le="0.1"} 2
lavender_bark_push_duration_seconds_bucket{le="+Inf"} 5
lavender_bark_push_duration_seconds_sum 1.5
lavender_bark_push_duration_seconds_count 5
`

func TestMetricsReader(t *testing.T) {
	m, err := ParseMetrics(exposition)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels Labels
		want   float64
		err    string
	}{
		{"lavender_bark_pushes_total", Labels{"target": "phone.bark.env:1", "result": "ok"}, 3, ""},
		{"lavender_bark_pushes_total", Labels{"target": "tablet.bark.env:1"}, 4, ""},
		{"lavender_swap_used_ratio", nil, 0.54, ""},
		{"lavender_bark_push_duration_seconds_count", nil, 5, ""},
		{"lavender_bark_push_duration_seconds_sum", nil, 1.5, ""},
		{"lavender_bark_push_duration_seconds_bucket", Labels{"le": "0.1"}, 2, ""},
		{"lavender_bark_push_duration_seconds_bucket", Labels{"le": "+Inf"}, 5, ""},
		{"lavender_bark_pushes_total", Labels{"result": "ok"}, 0, `2 series match lavender_bark_pushes_total{result="ok"}`},
		{"lavender_bark_pushes_total", Labels{"target": "watch.bark.env:1"}, 0,
			`no series lavender_bark_pushes_total{target="watch.bark.env:1"}; there are: lavender_bark_pushes_total{result="failed",target="phone.bark.env:1"}`},
		{"lavender_nothing_total", nil, 0, "no metric lavender_nothing_total in the scrape"},
		{"lavender_bark_push_duration_seconds", nil, 0, "is a histogram: ask for lavender_bark_push_duration_seconds_count"},
	} {
		got, err := m.Value(tc.name, tc.labels)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("Value(%s, %v): %v", tc.name, tc.labels, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Value(%s, %v): error %v, want one with %q", tc.name, tc.labels, err, tc.err)
		case tc.err == "" && got != tc.want:
			t.Errorf("Value(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if sum, err := m.Sum("lavender_bark_pushes_total", Labels{"result": "ok"}); err != nil || sum != 7 {
		t.Errorf("Sum = %v, %v; want 7", sum, err)
	}
	if sum, err := m.Sum("lavender_bark_pushes_total", Labels{"result": "held"}); err != nil || sum != 0 {
		t.Errorf("Sum of no series = %v, %v; want 0", sum, err)
	}
	if _, err := m.Sum("lavender_nothing_total", nil); err == nil {
		t.Error("Sum of an absent metric: no error")
	}
	if !m.Has("lavender_swap_used_ratio") || m.Has("lavender_nothing") || !m.Has("lavender_bark_push_duration_seconds_count") {
		t.Error("Has")
	}
	if _, err := ParseMetrics("not a metric line\n"); err == nil {
		t.Error("ParseMetrics accepted garbage")
	}
}

// TestFetchAndGatherMetrics: the reader gets the same value from a live
// /metrics behind basic auth as from the registry itself.
func TestFetchAndGatherMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lavender_webhook_requests_total", Help: "h"}, []string{"code"})
	reg.MustRegister(c)
	c.WithLabelValues("200").Add(2)
	c.WithLabelValues("413").Inc()
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "p" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	live, err := FetchMetrics(nil, srv.URL, "u", "p")
	if err != nil {
		t.Fatal(err)
	}
	gathered, err := GatherMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Metrics{live, gathered} {
		if v := m.MustValue(t, "lavender_webhook_requests_total", Labels{"code": "413"}); v != 1 {
			t.Errorf("413s = %v, want 1", v)
		}
	}
	if _, err := FetchMetrics(nil, srv.URL, "", ""); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("without credentials: %v, want HTTP 401", err)
	}
}

// TestTLSAndWebConfig: the certificate is trusted through the CA only,
// and exporter-toolkit accepts the web config, whose hashes match.
func TestTLSAndWebConfig(t *testing.T) {
	f := NewTLS(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hi")) }))
	srv.TLS = f.ServerConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	resp, err := f.Client().Get(srv.URL)
	if err != nil {
		t.Fatalf("client trusting the CA: %v", err)
	}
	resp.Body.Close()
	if _, err := http.Get(srv.URL); err == nil {
		t.Error("a default client trusted the test CA")
	}
	if info, err := os.Stat(f.KeyFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", info, err)
	}

	path := WriteWebConfig(t, WebConfig{TLS: f, Users: map[string]string{"alertmanager": "correct horse: battery #staple", "trainer": "s3cret"}})
	if err := web.Validate(path); err != nil {
		t.Fatalf("exporter-toolkit refuses the web config: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TLS   map[string]string `yaml:"tls_server_config"`
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.TLS["cert_file"] != f.CertFile || doc.TLS["key_file"] != f.KeyFile {
		t.Errorf("tls_server_config %v", doc.TLS)
	}
	if bcrypt.CompareHashAndPassword([]byte(doc.Users["alertmanager"]), []byte("correct horse: battery #staple")) != nil ||
		bcrypt.CompareHashAndPassword([]byte(doc.Users["trainer"]), []byte("s3cret")) != nil {
		t.Errorf("basic_auth_users do not match the passwords:\n%s", data)
	}
	if plain := WriteWebConfig(t, WebConfig{Users: map[string]string{"u": "p"}}); web.Validate(plain) != nil {
		t.Error("auth-only web config refused")
	}
}

// TestLogAddresses: the listener's address is read from exporter-toolkit's
// lines in either log format.
func TestLogAddresses(t *testing.T) {
	log := `time=2026-11-30T13:29:06.203Z level=INFO source=exporter.go:74 msg="starting lavender exporter" address=not-this
time=2026-11-30T13:29:06.203Z level=INFO source=tls_config.go:395 msg="Listening on" address=127.0.0.1:44865
time=2026-11-30T13:29:06.203Z level=INFO source=tls_config.go:398 msg="TLS is disabled." http2=false address=127.0.0.1:44865
{"time":"2026-11-30T13:29:09.2Z","level":"INFO","source":"tls_config.go:395","msg":"Listening on","address":"[::1]:43871"}
{"time":"2026-11-30T13:29:09.2Z","level":"INFO","source":"tls_config.go:438","msg":"TLS is enabled.","http2":true,"address":"[::1]:43871"}
`
	if got := logAddresses(log, "Listening on"); strings.Join(got, " ") != "127.0.0.1:44865 [::1]:43871" {
		t.Errorf("Listening on: %q", got)
	}
	if got := logAddresses(log, "TLS is enabled."); strings.Join(got, " ") != "[::1]:43871" {
		t.Errorf("TLS is enabled.: %q", got)
	}
}

// TestPrivateDir: files land mode 0600 in a 0700 dir, and a rewrite of a
// file made readable by others makes it private again.
func TestPrivateDir(t *testing.T) {
	dir := PrivateDir(t, "conf", map[string]string{"a.env": "x"})
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 || filepath.Base(dir) != "conf" {
		t.Fatalf("dir %s: %v %v", dir, st, err)
	}
	path := filepath.Join(dir, "a.env")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	WritePrivate(t, dir, map[string]string{"a.env": "y", "b.env": "z"})
	for name, want := range map[string]string{"a.env": "y", "b.env": "z"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		st, _ := os.Stat(filepath.Join(dir, name))
		if err != nil || string(data) != want || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %q %v, mode %v", name, data, err, st.Mode().Perm())
		}
	}
}
