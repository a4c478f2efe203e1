package exporter

import (
	"context"
	"encoding/json"
	"html/template"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeSection struct{}

func (fakeSection) StatusName() string { return "bark" }
func (fakeSection) StatusHTML() template.HTML {
	return `<section id="bark" class="card"><h2>Bark</h2><p>phone.bark.env:1 ok</p></section>`
}
func (fakeSection) StatusJSON() any { return map[string]string{"phone.bark.env:1": "ok"} }

// statusRig is an exporter with a status page on a copy of a fake procfs.
type statusRig struct {
	env    *testEnv
	procfs string
	hist   *procfsHistory
	page   *StatusPage
	srv    *httptest.Server
}

func newStatusRig(t *testing.T, procfsTree string) *statusRig {
	t.Helper()
	r := &statusRig{env: newTestEnv(t), procfs: t.TempDir()}
	if err := os.Mkdir(filepath.Join(r.procfs, "pressure"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"meminfo", "vmstat", pressureFile} {
		data, err := os.ReadFile(filepath.Join("testdata/procfs", procfsTree, name))
		if err != nil {
			continue // some trees lack vmstat or PSI on purpose
		}
		if err := os.WriteFile(filepath.Join(r.procfs, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.hist = &procfsHistory{procfs: r.procfs, now: r.env.clock.Now}
	r.page = NewStatusPage(r.env.e, StatusConfig{
		History: r.hist, Threshold: 0.5, Sections: []StatusSection{fakeSection{}},
		Links: []string{"/metrics"}, Now: r.env.clock.Now,
	})
	mux := http.NewServeMux()
	r.page.Register(mux)
	r.env.e.Register(mux)
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *statusRig) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(r.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestStatusPageContent(t *testing.T) {
	r := newStatusRig(t, "swap54")
	if _, err := r.env.e.StartRun("device=cuda lavender=v0.1.0", "RUN start  device=cuda"); err != nil {
		t.Fatal(err)
	}
	for range 4 { // four samples, a step apart
		if _, err := r.hist.Read(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.env.clock.Advance(10 * time.Second)
	}
	r.env.beat("Building model", EventStart, "")
	r.env.clock.Advance(13 * time.Second)
	r.env.beat("Building model", EventEnd, "")
	r.env.beat("Pretrain 1/3", EventStart, "")
	r.env.beat("Eval", EventStart, "")
	r.env.beat("Eval", EventEnd, StatusFailed)
	r.env.clock.Advance(90 * time.Second)

	code, page := r.get(t, "/")
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	for _, want := range []string{
		`id="swap-percent">54%<`, // the large figure
		`class="big high"`,       // at or above the threshold: warning colour
		"17.3 of 32.0 GiB used",  // the bytes
		`<td class="name">Building model</td>`,
		`<td class="name">Pretrain 1/3</td>`,
		`<span class="badge failed">✗ failed</span>`,
		"1m 30s ago",                      // heartbeat age of the running phase
		"13s",                             // duration of the ended phase
		"phone.bark.env:1 ok",             // a section from another package
		"# device=cuda lavender=v0.1.0\n", // the run log, verbatim
		" START Pretrain 1/3\n",
		`<a href="/metrics">/metrics</a>`,
		`<meta http-equiv="refresh" content="10">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	pts := regexp.MustCompile(`<polyline class="ratio" points="([^"]+)"`).FindStringSubmatch(page)
	if pts == nil || len(strings.Fields(pts[1])) != 4 {
		t.Errorf("chart: want a polyline with 4 points, got %v", pts)
	}
	// The threshold line sits at 50 % of the 150-unit-high chart.
	if !strings.Contains(page, `y1="75" y2="75"`) {
		t.Error("threshold line not at 50 %")
	}

	// Memory pressure (some avg10 23.15 %) beside swap: the figure, above
	// the 10 % line so in the warning colour, and its own line in the
	// chart, at the same x as swap's points, with its label.
	for _, want := range []string{
		`id="pressure-percent">23%<`,
		`<strong class="high" id="pressure-percent">`,
		`<span class="key pressure">memory pressure</span>`,
		`class="threshold pressure-threshold" x1="0" x2="600" y1="135" y2="135"`, // 10 %
		"are 50% (swap) and 10% (pressure)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	pp := regexp.MustCompile(`<polyline class="pressure" points="([^"]+)"`).FindStringSubmatch(page)
	if pp == nil || len(strings.Fields(pp[1])) != 4 {
		t.Fatalf("chart: want a pressure polyline with 4 points, got %v", pp)
	}
	swapPts, pressurePts := strings.Fields(pts[1]), strings.Fields(pp[1])
	for i := range pressurePts {
		sx, sy, _ := strings.Cut(swapPts[i], ",")
		px, py, _ := strings.Cut(pressurePts[i], ",")
		// 150 * (1 - 0.2315) = 115.3; swap at 54 % is at 69.0.
		if px != sx || py != "115.3" || sy != "69.0" {
			t.Errorf("point %d: swap %s, pressure %s; want the same x, y 69.0 and 115.3", i, swapPts[i], pressurePts[i])
		}
	}
}

// A kernel without PSI: no pressure line, and the page says why.
func TestStatusPageWithoutPSI(t *testing.T) {
	r := newStatusRig(t, "nopsi")
	for range 3 {
		if _, err := r.hist.Read(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.env.clock.Advance(10 * time.Second)
	}
	_, page := r.get(t, "/")
	if strings.Contains(page, `<polyline class="pressure"`) || strings.Contains(page, `class="threshold pressure-threshold"`) {
		t.Error("a pressure line drawn on a host without PSI")
	}
	if !strings.Contains(page, "memory pressure: not available (kernel without PSI)") {
		t.Error("the page does not say that pressure is unavailable")
	}
	if !regexp.MustCompile(`<polyline class="ratio" points="[^"]+"`).MatchString(page) {
		t.Error("the swap line is gone too")
	}
	if h := r.hist.Samples(); len(h) != 3 || h[0].PressureSomeAvg10 != nil {
		t.Errorf("samples %+v: want 3 without pressure", h)
	}
}

func TestStatusPageEscapes(t *testing.T) {
	r := newStatusRig(t, "swap54")
	const evil = `<script>alert(1)</script>`
	r.env.beat(evil, EventStart, "")
	_, page := r.get(t, "/")
	if strings.Contains(page, "<script") {
		t.Fatalf("raw <script> in the page:\n%s", page)
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the phase name is not shown as text")
	}
	resp, err := http.Get(r.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q: scripts must be off even if escaping failed", csp)
	}
}

func TestStatusPageStates(t *testing.T) {
	t.Run("no swap", func(t *testing.T) {
		r := newStatusRig(t, "noswap")
		r.hist.Read(context.Background())
		if _, page := r.get(t, "/"); !strings.Contains(page, "no swap") || strings.Contains(page, "class=\"big high\"") {
			t.Error("a host without swap must show 'no swap' and no warning")
		}
	})
	t.Run("read error", func(t *testing.T) {
		r := newStatusRig(t, "garbage")
		r.hist.Read(context.Background())
		if _, page := r.get(t, "/"); !strings.Contains(page, "cannot read swap") {
			t.Error("a failed read must be shown")
		}
	})
	t.Run("before the first reading", func(t *testing.T) {
		r := newStatusRig(t, "swap54")
		if _, page := r.get(t, "/"); !strings.Contains(page, "no reading yet") || !strings.Contains(page, "no run yet") {
			t.Error("want placeholders before any reading and run")
		}
	})
	t.Run("paths and methods", func(t *testing.T) {
		r := newStatusRig(t, "swap54")
		if code, _ := r.get(t, "/nope"); code != 404 {
			t.Errorf("GET /nope = %d, want 404", code)
		}
		// A known path with a wrong method is 405 with Allow; a path that
		// does not exist is 404 whatever the method (issue 14.5).
		for _, tc := range []struct {
			path  string
			code  int
			allow string
		}{
			{"/", 405, "GET, HEAD"},
			{StatusPath, 405, "GET, HEAD"},
			{"/webhooks", 404, ""},
			{"/api/v1/heartbeats", 404, ""},
			{"/nope", 404, ""},
		} {
			resp, err := http.Post(r.srv.URL+tc.path, "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || resp.Header.Get("Allow") != tc.allow {
				t.Errorf("POST %s = %d Allow %q (%s), want %d Allow %q", tc.path, resp.StatusCode, resp.Header.Get("Allow"), body, tc.code, tc.allow)
			}
		}
	})
}

// The page reads swap from the history only: with procfs gone it still
// shows the last reading, and it never reads procfs itself.
func TestStatusPageDoesNotReadProcfs(t *testing.T) {
	r := newStatusRig(t, "swap54")
	r.hist.Read(context.Background())
	if err := os.RemoveAll(r.procfs); err != nil {
		t.Fatal(err)
	}
	if _, page := r.get(t, "/"); !strings.Contains(page, `id="swap-percent">54%<`) {
		t.Error("the page lost the reading once procfs went away: it reads procfs itself")
	}
}

func TestStatusJSON(t *testing.T) {
	r := newStatusRig(t, "swap54")
	if _, err := r.env.e.StartRun("", ""); err != nil {
		t.Fatal(err)
	}
	r.hist.Read(context.Background())
	r.env.beat("SFT", EventStart, "")
	code, body := r.get(t, StatusPath)
	if code != 200 {
		t.Fatalf("GET %s = %d", StatusPath, code)
	}
	var s struct {
		Swap              SwapSample
		Threshold         float64
		PressureThreshold float64 `json:"pressure_threshold"`
		History           []SwapSample
		Run               Run
		Phases            []Phase
		RunLog            string `json:"run_log"`
		Sections          map[string]map[string]string
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Swap.TotalBytes != 32<<30 || len(s.History) != 1 || s.Threshold != 0.5 {
		t.Errorf("swap %+v history %d threshold %v", s.Swap, len(s.History), s.Threshold)
	}
	for what, p := range map[string]*float64{"swap": s.Swap.PressureSomeAvg10, "history": s.History[0].PressureSomeAvg10} {
		if p == nil || math.Abs(*p-0.2315) > 1e-9 {
			t.Errorf("%s: pressure_some_avg10 %v, want 0.2315", what, p)
		}
	}
	if s.PressureThreshold != 0.1 {
		t.Errorf("pressure threshold %v, want 0.1", s.PressureThreshold)
	}
	if len(s.Phases) != 1 || s.Phases[0].Name != "SFT" || !strings.Contains(s.RunLog, "START SFT") || s.Run.File == "" {
		t.Errorf("phases %+v run %+v log %q", s.Phases, s.Run, s.RunLog)
	}
	if s.Sections["bark"]["phone.bark.env:1"] != "ok" {
		t.Errorf("sections %v", s.Sections)
	}
}

// procfsHistory stands in for the watchdog's history (cmd's adapter of
// it is tested in cmd): every Read reads the fake procfs, as a poll would,
// and keeps every sample.
type procfsHistory struct {
	procfs string
	now    func() time.Time

	mu      sync.Mutex
	samples []SwapSample
	err     error
}

func (h *procfsHistory) Read(ctx context.Context) (SwapSample, error) {
	r, err := ReadHost(ctx, h.procfs)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
	if err != nil {
		return SwapSample{}, err
	}
	s := SwapSample{Time: h.now(), UsedRatio: r.Swap.UsedRatio, UsedBytes: r.Swap.UsedBytes, TotalBytes: r.Swap.TotalBytes}
	if r.Pressure.Available {
		some := r.Pressure.SomeAvg10
		s.PressureSomeAvg10 = &some
	}
	h.samples = append(h.samples, s)
	return s, nil
}

func (h *procfsHistory) Latest() (SwapSample, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil || len(h.samples) == 0 {
		return SwapSample{}, h.err
	}
	return h.samples[len(h.samples)-1], nil
}

func (h *procfsHistory) Samples() []SwapSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]SwapSample(nil), h.samples...)
}

func (h *procfsHistory) Window() time.Duration { return time.Hour }
