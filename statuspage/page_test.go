package statuspage

import (
	"encoding/json"
	"html/template"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/phaseserver"
	"github.com/lavender-ml/lavender/runlog"
	"github.com/lavender-ml/lavender/watchdog"
)

// t0 is a fixed local time, so the page's clock times are predictable.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)

const gib = 1 << 30

// swap54 is the reading of exporter/testdata/procfs/swap54: 54 % of 32 GiB
// of swap and memory pressure (some avg10) of 23.15 %.
func swap54() watchdog.Sample {
	return watchdog.Sample{
		Swap:     watchdog.Swap{UsedBytes: 18554258472, TotalBytes: 32 * gib, Ratio: 0.54}, // 17.28 GiB
		Pressure: watchdog.Pressure{Available: true, Some: 0.2315, Full: 0.2},
	}
}

// rig is a real exporter (phases and run log in a temp dir) and the
// watchdog's history behind a page on a loopback server, all on one fake
// clock.
type rig struct {
	t     *testing.T
	clock *testkit.Clock
	exp   *phaseserver.Server
	hist  *watchdog.History
	bark  delivery.BarkStatus
	rules []watchdog.RuleState
	page  *Page
	srv   *httptest.Server
}

func newRig(t *testing.T, edit ...func(*Config)) *rig {
	t.Helper()
	r := &rig{t: t, clock: testkit.NewClock(t0), hist: watchdog.NewHistory(10 * time.Second)}
	exp := phaseserver.New(phaseserver.Config{ProcFS: t.TempDir(), Runlog: runlog.Options{Dir: t.TempDir()}, Clock: r.clock.Now}, slog.New(slog.DiscardHandler))
	r.exp = exp
	r.bark = delivery.BarkStatus{Targets: []delivery.TargetStatus{{Target: "phone.bark.env:1", Result: "ok", Time: t0}}}
	cfg := Config{
		Phases:     exp.Snapshot,
		RunLog:     exp.RunLog,
		History:    r.hist,
		Bark:       func() delivery.BarkStatus { return r.bark },
		Rules:      func() []watchdog.RuleState { return r.rules },
		Threshold:  0.5,
		StallAfter: watchdog.DefaultStallAfter,
		Links:      []string{"/metrics"},
		Now:        r.clock.Now,
	}
	for _, f := range edit {
		f(&cfg)
	}
	page, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.page = page
	mux := http.NewServeMux()
	r.page.Register(mux)
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

// record records s in the history, stamped now, and moves the clock on.
func (r *rig) record(s watchdog.Sample, step time.Duration) {
	s.Time = r.clock.Now()
	r.hist.Record(s)
	r.clock.Advance(step)
}

// beat applies one heartbeat; step and total are optional (nil).
func (r *rig) beat(name, event, status string, step, total *uint64) {
	r.t.Helper()
	if _, err := r.exp.Apply(phaseapi.HeartbeatRequest{Phase: name, Event: event, Status: status, Step: step, Total: total}); err != nil {
		r.t.Fatalf("%s %q: %v", event, name, err)
	}
}

func n(v uint64) *uint64 { return &v }

func (r *rig) get(path string) (int, http.Header, string) {
	r.t.Helper()
	resp, err := http.Get(r.srv.URL + path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

func (r *rig) html() string {
	r.t.Helper()
	code, _, body := r.get("/")
	if code != 200 {
		r.t.Fatalf("GET / = %d: %s", code, body)
	}
	return body
}

func TestPageContent(t *testing.T) {
	r := newRig(t)
	if _, err := r.exp.StartRun("device=cuda lavender=v0.1.0", "RUN start  device=cuda"); err != nil {
		t.Fatal(err)
	}
	for range 4 { // four samples, a step apart
		r.record(swap54(), 10*time.Second)
	}
	r.beat("Building model", phaseapi.EventStart, "", nil, nil)
	r.clock.Advance(13 * time.Second)
	r.beat("Building model", phaseapi.EventEnd, "", nil, nil)
	r.beat("Pretrain 1/3", phaseapi.EventStart, "", nil, nil)
	r.beat("Eval", phaseapi.EventStart, "", nil, nil)
	if _, err := r.exp.Apply(phaseapi.HeartbeatRequest{Phase: "Eval", Event: phaseapi.EventEnd, Status: phaseapi.StatusFailed,
		Reason: "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB <b>"}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(90 * time.Second)

	page := r.html()
	for _, want := range []string{
		`id="swap-percent">54%<`, // the large figure
		`class="big high"`,       // at or above the threshold: warning colour
		"17.3 of 32.0 GiB used",  // the bytes
		`<td class="name">Building model</td>`,
		`<td class="name">Pretrain 1/3</td>`,
		`<span class="badge failed">✗ failed</span><br><span class="reason">RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB &lt;b&gt;</span>`,
		`<span class="badge ok">✓ ok</span>`,
		"1m 30s ago",                      // heartbeat age of the running phase
		"ok in 13s",                       // duration of the ended phase
		"failed after 0s",                 // and of the failed one
		"<code>phone.bark.env:1</code>",   // the bridge's target
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
func TestPageWithoutPSI(t *testing.T) {
	r := newRig(t)
	for range 3 {
		s := swap54()
		s.Pressure = watchdog.Pressure{}
		r.record(s, 10*time.Second)
	}
	page := r.html()
	if strings.Contains(page, `<polyline class="pressure"`) || strings.Contains(page, `class="threshold pressure-threshold"`) {
		t.Error("a pressure line drawn on a host without PSI")
	}
	if !strings.Contains(page, "memory pressure: not available (kernel without PSI)") {
		t.Error("the page does not say that pressure is unavailable")
	}
	if !regexp.MustCompile(`<polyline class="ratio" points="[^"]+"`).MatchString(page) {
		t.Error("the swap line is gone too")
	}
}

// TestPageProgress: a running phase shows its progress bar, step/total and
// ETA (a duration and a clock time); one silent for the stall time and one
// whose step has not moved while it pings are marked stalled, with since
// when; a phase without steps shows none.
func TestPageProgress(t *testing.T) {
	r := newRig(t)
	if _, err := r.exp.StartRun("", ""); err != nil {
		t.Fatal(err)
	}
	// "Data" sends steps, then goes silent at 12:01.
	r.beat("Data", phaseapi.EventStart, "", n(0), n(100))
	r.clock.Advance(time.Minute)
	r.beat("Data", phaseapi.EventPing, "", n(10), nil)
	// "SFT" reports step 300/1000 at 12:02 and keeps pinging with it.
	r.beat("SFT", phaseapi.EventStart, "", n(100), n(1000))
	r.clock.Advance(time.Minute)
	r.beat("SFT", phaseapi.EventPing, "", n(300), nil)
	r.beat("Plain", phaseapi.EventStart, "", nil, nil)
	for range 11 {
		r.clock.Advance(time.Minute)
		r.beat("SFT", phaseapi.EventPing, "", n(300), nil)
		r.beat("Plain", phaseapi.EventPing, "", nil, nil)
	}
	// "Pretrain 1/3" advances 1200 steps a minute: 1200/6000 after two
	// advances, 4 minutes to go.
	r.beat("Pretrain 1/3", phaseapi.EventStart, "", n(0), n(6000))
	r.clock.Advance(time.Minute)
	r.beat("Pretrain 1/3", phaseapi.EventPing, "", n(600), nil)
	r.clock.Advance(time.Minute)
	r.beat("Pretrain 1/3", phaseapi.EventPing, "", n(1200), nil)
	// Now 12:15.

	rows := phaseRows(t, r.html())
	pretrain := rows["Pretrain 1/3"]
	for _, want := range []string{
		`<progress max="6000" value="1200">20%</progress>`,
		`<span class="steps">1200/6000</span>`,
		`<span class="eta">ETA 8m 00s · 12:23</span>`, // (6000-1200) steps at 600 a minute
		`<span class="badge active">running</span>`,
	} {
		if !strings.Contains(pretrain, want) {
			t.Errorf("Pretrain 1/3 row lacks %q:\n%s", want, pretrain)
		}
	}
	if strings.Contains(pretrain, "stalled") {
		t.Errorf("an advancing phase is marked stalled:\n%s", pretrain)
	}
	data := rows["Data"]
	for _, want := range []string{
		`<span class="badge stalled">⚠ stalled</span> <span class="stalled-since">since 12:01</span>`,
		"no heartbeat for 14m 00s",
		`<span class="steps">10/100</span>`,
	} {
		if !strings.Contains(data, want) {
			t.Errorf("Data row lacks %q:\n%s", want, data)
		}
	}
	if strings.Contains(data, "ETA") {
		t.Errorf("a phase with one advance shows an ETA:\n%s", data)
	}
	sft := rows["SFT"]
	for _, want := range []string{
		`<span class="badge stalled">⚠ stalled</span> <span class="stalled-since">since 12:02</span>`,
		"pings, but the step has not moved for 13m 00s",
		`<span class="steps">300/1000</span>`,
	} {
		if !strings.Contains(sft, want) {
			t.Errorf("SFT row lacks %q:\n%s", want, sft)
		}
	}
	if plain := rows["Plain"]; strings.Contains(plain, "stalled") || strings.Contains(plain, "<progress") {
		t.Errorf("a phase without steps that pings is shown stalled or with a bar:\n%s", plain)
	}

	// The JSON carries the same marks.
	var s struct {
		Phases []struct {
			Name       string
			ETASeconds float64 `json:"eta_seconds"`
			Stalled    *Stall
		}
	}
	_, _, body := r.get(StatusPath)
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range s.Phases {
		got[p.Name] = "running"
		if p.Stalled != nil {
			got[p.Name] = "stalled on step " + p.Stalled.Since.Local().Format("15:04")
			if !p.Stalled.OnStep {
				got[p.Name] = "stalled silent " + p.Stalled.Since.Local().Format("15:04")
			}
		}
		if p.ETASeconds > 0 {
			got[p.Name] += " eta " + time.Duration(p.ETASeconds*float64(time.Second)).String()
		}
	}
	want := map[string]string{"Data": "stalled silent 12:01", "SFT": "stalled on step 12:02", "Plain": "running", "Pretrain 1/3": "running eta 8m0s"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("JSON: %s is %q, want %q", k, got[k], v)
		}
	}

	// With the stall time off, nothing is marked.
	off := newRig(t, func(c *Config) { c.StallAfter = 0 })
	off.beat("Data", phaseapi.EventStart, "", nil, nil)
	off.clock.Advance(time.Hour)
	if page := off.html(); strings.Contains(page, "badge stalled") {
		t.Error("a stall marked with the stall time off")
	}
}

// phaseRows splits the phases table by phase name (as the page shows it).
func phaseRows(t *testing.T, page string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)<tr class="[^"]*">\s*<td class="name">(.*?)</td>(.*?)</tr>`).FindAllStringSubmatch(page, -1) {
		rows[m[1]] = m[2]
	}
	if len(rows) == 0 {
		t.Fatalf("no phase rows in:\n%s", page)
	}
	return rows
}

// TestPageEscapes: whatever a phase name, an alert or a target holds, it
// is shown as text, in every place it appears.
func TestPageEscapes(t *testing.T) {
	for _, name := range []string{
		`<script>alert(1)</script>`,
		`"><img src=x onerror=alert(1)>`,
		`</td></tr></table><h1>x</h1>`,
		`{{.CSS}} & &amp; <!--`,
		`javascript:alert(1)`,
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			r.beat(name, phaseapi.EventStart, "", n(5), n(10))
			r.clock.Advance(time.Hour) // stalled: every cell of the row is drawn
			r.bark = delivery.BarkStatus{
				Targets: []delivery.TargetStatus{{Target: name, Result: "failed: " + name}},
				Events:  []delivery.Event{{Time: t0, Source: "webhook", Status: "firing", Subject: name, Action: "pushed", OK: 1, Failures: []string{name}}},
			}
			r.rules = []watchdog.RuleState{{Name: watchdog.RuleName(name), Since: t0}}
			page := r.html()
			for _, raw := range []string{"<script", "<img", "<h1>x", "<!--", `href="javascript`} {
				if strings.Contains(page, raw) {
					t.Fatalf("raw %q in the page:\n%s", raw, page)
				}
			}
			escaped := template.HTMLEscapeString(name)
			// The name cell, the START line of the run log, the target,
			// its result, the event, its failure and the rule.
			if c := strings.Count(page, escaped); c < 6 {
				t.Errorf("the name appears escaped %d times, want at least 6:\n%s", c, page)
			}
			if !strings.Contains(page, `class="badge stalled"`) {
				t.Error("the stalled row was not drawn")
			}
		})
	}
	r := newRig(t)
	_, h, _ := r.get("/")
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("CSP %q: scripts must be off even if escaping failed", csp)
	}
	// The JSON answers, the 404 that quotes the path included, are never
	// sniffed as HTML.
	for _, path := range []string{"/api/v1/status", "/api/v1/<script>alert(1)</script>"} {
		if _, h, _ := r.get(path); h.Get("Content-Type") != "application/json" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: Content-Type %q, X-Content-Type-Options %q", path, h.Get("Content-Type"), h.Get("X-Content-Type-Options"))
		}
	}
}

func TestPageStates(t *testing.T) {
	t.Run("no swap", func(t *testing.T) {
		r := newRig(t)
		r.record(watchdog.Sample{}, time.Second)
		if page := r.html(); !strings.Contains(page, "no swap") || strings.Contains(page, "class=\"big high\"") {
			t.Error("a host without swap must show 'no swap' and no warning")
		}
	})
	t.Run("read error", func(t *testing.T) {
		r := newRig(t)
		r.record(swap54(), time.Second)
		r.hist.RecordError(io.ErrUnexpectedEOF)
		if page := r.html(); !strings.Contains(page, "cannot read swap: unexpected EOF") {
			t.Error("a failed read must be shown")
		}
	})
	t.Run("before the first reading", func(t *testing.T) {
		r := newRig(t)
		page := r.html()
		for _, want := range []string{"no reading yet", "no run yet", "no phases yet", "nothing pushed yet"} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks the placeholder %q", want)
			}
		}
	})
	t.Run("without bridge and watchdog", func(t *testing.T) {
		r := newRig(t, func(c *Config) { c.Bark, c.Rules, c.History = nil, nil, nil })
		page := r.html()
		if strings.Contains(page, `id="bark"`) || strings.Contains(page, `id="watchdog"`) || !strings.Contains(page, "no reading yet") {
			t.Errorf("an exporter-only page shows a bridge or watchdog:\n%s", page)
		}
	})
	t.Run("watchdog rules", func(t *testing.T) {
		r := newRig(t)
		r.rules = []watchdog.RuleState{{Name: watchdog.RuleSwap, Armed: true}, {Name: watchdog.RuleStalled, Since: t0.Add(-time.Hour)},
			{Name: watchdog.RuleFailed, Since: t0.Add(-time.Hour), Undelivered: true}}
		page := r.html()
		for _, want := range []string{`<span class="rule">swap</span> <span class="badge ok">armed</span>`, `<span class="rule">stalled</span> <span class="badge failed">pushed</span> <span class="muted">since 11:00</span>`,
			// A push no target took is never shown as pushed.
			`<span class="rule">failed</span> <span class="badge failed">not delivered, retrying</span> <span class="muted">since 11:00</span>`} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		if _, _, body := r.get("/api/v1/status"); !strings.Contains(body, `"rule":"failed","armed":false,"since":`) || !strings.Contains(body, `"undelivered":true`) {
			t.Errorf("the status API does not say the failed rule's push is undelivered:\n%s", body)
		}
	})
	t.Run("rules without their source", func(t *testing.T) {
		r := newRig(t, func(c *Config) {
			c.KernelLog = func() KernelLogStatus { return KernelLogStatus{Why: "needs root or CAP_SYSLOG"} }
			c.GPUsOff = "no NVIDIA driver"
		})
		r.rules = []watchdog.RuleState{{Name: watchdog.RuleSwap, Armed: true}, {Name: watchdog.RuleDisk, Armed: true},
			{Name: watchdog.RuleGPU, Armed: true}, {Name: watchdog.RuleGPULost, Armed: true}}
		page := r.html()
		for _, want := range []string{`<span class="rule">swap</span> <span class="badge ok">armed</span>`,
			`<span class="rule">disk</span> <span class="badge">not watching</span> <span class="muted">(the kernel log is not read)</span>`,
			`<span class="rule">gpu</span> <span class="badge">not watching</span> <span class="muted">(the kernel log is not read, and no GPU telemetry)</span>`,
			`<span class="rule">gpu-lost</span> <span class="badge">not watching</span> <span class="muted">(no GPU telemetry)</span>`} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		// With NVML, the Xids still come from its events: gpu watches.
		if got := notWatching(watchdog.RuleGPU, "the kernel log is not read", ""); got != "" {
			t.Errorf("gpu with NVML: %q", got)
		}
	})
	t.Run("paths and methods", func(t *testing.T) {
		r := newRig(t)
		if code, _, _ := r.get("/nope"); code != 404 {
			t.Errorf("GET /nope = %d, want 404", code)
		}
		for _, path := range []string{"/", StatusPath} {
			resp, err := http.Head(r.srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("HEAD %s = %d, want 200", path, resp.StatusCode)
			}
		}
		// A known path with a wrong method is 405 with Allow; a path that
		// does not exist is 404 whatever the method, never a 405 that
		// would suggest it exists.
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

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "statuspage: no phase source"},
		{Config{Phases: func() (*phaseapi.Run, []phaseapi.Phase) { return nil, nil }, StallAfter: -time.Second}, "statuspage: stall time must not be negative, not -1s"},
	} {
		if _, err := New(tc.cfg); err == nil || err.Error() != tc.want {
			t.Errorf("New: %v, want %q", err, tc.want)
		}
	}
}

func TestStatusJSON(t *testing.T) {
	r := newRig(t)
	if _, err := r.exp.StartRun("", ""); err != nil {
		t.Fatal(err)
	}
	r.record(swap54(), time.Second)
	r.beat("SFT", phaseapi.EventStart, "", nil, nil)
	r.rules = []watchdog.RuleState{{Name: watchdog.RuleSwap, Armed: true}}
	code, h, body := r.get(StatusPath)
	if code != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s = %d %s", StatusPath, code, h.Get("Content-Type"))
	}
	var s struct {
		Swap              SwapSample
		Threshold         float64
		PressureThreshold float64 `json:"pressure_threshold"`
		History           []SwapSample
		Run               phaseapi.Run
		Phases            []phaseapi.Phase
		RunLog            string `json:"run_log"`
		Sections          struct {
			Bark     delivery.BarkStatus
			Watchdog []map[string]any
		}
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
	if len(s.Sections.Bark.Targets) != 1 || s.Sections.Bark.Targets[0].Target != "phone.bark.env:1" {
		t.Errorf("sections.bark %+v", s.Sections.Bark)
	}
	if len(s.Sections.Watchdog) != 1 || s.Sections.Watchdog[0]["rule"] != "swap" || s.Sections.Watchdog[0]["armed"] != true {
		t.Errorf("sections.watchdog %+v", s.Sections.Watchdog)
	}
}

// TestPageConcurrentReaders is for -race: the page is read while the
// watchdog records into the history (wrapping its ring), heartbeats change
// the phase table and its run log, and the bridge's status changes.
func TestPageConcurrentReaders(t *testing.T) {
	r := newRig(t)
	var barkMu sync.Mutex
	r.page.cfg.Bark = func() delivery.BarkStatus { barkMu.Lock(); defer barkMu.Unlock(); return r.bark }
	const writes = watchdog.HistorySamples + 40
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range writes {
			r.record(swap54(), 10*time.Second)
			if _, err := r.exp.Apply(phaseapi.HeartbeatRequest{Phase: "SFT", Event: phaseapi.EventStart, Step: n(uint64(i)), Total: n(writes)}); err != nil {
				t.Error(err)
				return
			}
			barkMu.Lock()
			r.bark.Events = append(r.bark.Events, delivery.Event{Subject: "swap"})
			barkMu.Unlock()
		}
	}()
	pages := 0
	for {
		select {
		case <-done:
			if got := len(r.hist.Samples()); got != watchdog.HistorySamples {
				t.Errorf("%d samples after %d records, want %d", got, writes, watchdog.HistorySamples)
			}
			if pages == 0 {
				t.Error("the page was never read while the history filled")
			}
			return
		default:
		}
		if code, _, _ := r.get("/"); code != http.StatusOK {
			t.Fatalf("status page answered %d", code)
		}
		pages++
	}
}

// TestWhen: a time of today is its time of day; of another day, with the
// date, so an ETA past midnight or a stall from yesterday is not misread.
func TestWhen(t *testing.T) {
	now := time.Date(2026, 11, 29, 23, 30, 0, 0, time.Local)
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{now.Add(-time.Hour), "22:30"},
		{now.Add(20 * time.Minute), "23:50"},
		{now.Add(45 * time.Minute), "2026-11-30 00:15"},
		{now.Add(-24 * time.Hour), "2026-11-28 23:30"},
	} {
		if got := when(now, tc.t); got != tc.want {
			t.Errorf("when(%s) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

// TestPageSaysAPhaseOfUnknownOutcome: a phase that ended while lavender was
// down, with no end after, reads as over with its outcome unknown, never
// as "✓ ok" (or failed), and its duration as a lower bound.
func TestPageSaysAPhaseOfUnknownOutcome(t *testing.T) {
	p := phaseapi.Phase{Name: "Train", Status: phaseapi.StatusUnknown, Started: t0.Add(-2 * time.Hour), Ended: t0.Add(-time.Hour),
		LastHeartbeat: t0.Add(-time.Hour), DurationSeconds: 3600, Reason: "ended while lavender was down, its end never arrived (pid 4242 gone)"}
	r := newRig(t, func(c *Config) {
		c.Phases = func() (*phaseapi.Run, []phaseapi.Phase) { return nil, []phaseapi.Phase{p} }
	})
	page := r.html()
	for _, want := range []string{
		`<span class="badge unknown">? ended, outcome unknown</span><br><span class="reason muted">ended while lavender was down, its end never arrived (pid 4242 gone)</span>`,
		"ran at least 1h",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	row, _, _ := strings.Cut(page[strings.Index(page, `<td class="name">Train</td>`):], "</tr>")
	if strings.Contains(row, "✓ ok") || strings.Contains(row, "failed") {
		t.Errorf("a phase whose outcome is unknown reads as ok or failed: %s", row)
	}
}
