package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

// screenshotDir keeps the status page's screenshots after the test, for a
// person (or CI's artifacts) to look at; they are never committed.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("LAVENDER_SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "lavender-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func findChromium(t *testing.T) string {
	t.Helper()
	return testkit.NeedTool(t, "chromium", "chromium", "chromium-browser", "google-chrome")
}

// stalledRun starts a new run in logDir, as another process would, whose
// saved phase table holds two phases that stalled before the exporter
// follows it: "Data loader" silent since an hour ago, and "SFT" still
// pinging, with step 1200/5000 unchanged for 40 minutes. It returns when
// each stall began.
func stalledRun(t *testing.T, logDir string) (silentSince, stepSince time.Time) {
	t.Helper()
	l, err := runlog.Start(runlog.Options{Dir: logDir}, "device=cuda lavender=v0.1.0", runlog.RunStart)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	silentSince, stepSince = now.Add(-time.Hour), now.Add(-40*time.Minute)
	table := map[string]any{
		"version":     1,
		"run":         filepath.Base(l.Path()),
		"run_started": now.Add(-2 * time.Hour),
		"phases": []map[string]any{
			{"name": "Data loader", "status": "active", "started": now.Add(-2 * time.Hour), "last_heartbeat": silentSince, "heartbeats": 3,
				"step": 50, "total": 100, "last_progress": silentSince},
			{"name": "SFT", "status": "active", "started": now.Add(-2 * time.Hour), "last_heartbeat": now, "heartbeats": 400,
				"step": 1200, "total": 5000, "last_progress": stepSince, "advances": 12, "steps_per_second": 1.5},
		},
	}
	data, err := json.Marshal(table)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(strings.TrimSuffix(l.Path(), ".log")+".phases.json", data, 0o644); err != nil {
		t.Fatal(err)
	}
	return silentSince, stepSince
}

// TestStatusPageInChromium loads the status page of a real serve, at 54 %
// swap and 23 % memory pressure with phases that run, advance, stall and
// end, and a push, in headless Chromium.
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	chromium := findChromium(t)

	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.30)})
	// A watched directory whose name is markup, and one not there yet.
	evilDisk := filepath.Join(t.TempDir(), `<img src=x onerror=alert(2)>`)
	if err := os.Mkdir(evilDisk, 0o755); err != nil {
		t.Fatal(err)
	}
	r := startServe(t, procfs, "--watchdog.interval=20ms", "--watchdog.repeat=1h", "--status.history-step=50ms",
		"--run.header=device=cuda lavender=v0.1.0", "--watchdog.shm=", "--watchdog.disk="+evilDisk, "--watchdog.disk=/nonexistent/run-7")
	// The first heartbeat makes the exporter follow the run started
	// beside it, with its saved table.
	silentSince, stepSince := stalledRun(t, r.logDir)
	const evil = `<script>alert(1)</script>`
	for _, hb := range []string{
		`{"phase":"Building model","event":"start"}`,
		`{"phase":"Building model","event":"end"}`,
		`{"phase":"Pretrain 1/3","event":"start","step":0,"total":5000}`,
		`{"phase":"Pretrain 1/3","event":"ping","step":100}`,
		`{"phase":"Pretrain 1/3","event":"ping","step":200}`,
		`{"phase":"Eval","event":"start"}`,
		`{"phase":"Eval","event":"end","status":"failed"}`,
		`{"phase":"` + strings.ReplaceAll(evil, "/", `\/`) + `","event":"start","step":1,"total":2}`,
	} {
		if code, body := testkit.MustDo(t, nil, "POST", r.base+"/api/v1/heartbeat", []byte(hb), "", ""); code != 200 {
			t.Fatalf("heartbeat %s: %d %s", hb, code, body)
		}
	}
	// Swap climbs to 54 % and pressure to 23 %, a few chart samples at
	// each level. A sample at a level means the watchdog's poll that took
	// it has also judged it, so the pressure push (at 15 %) has gone out
	// before swap reaches 54 %, and each is a push of its own.
	const samplesPerLevel = 4
	samples := 0
	for i, ratio := range []float64{0.30, 0.38, 0.46, 0.54} {
		procfs.SetSwap(testkit.SwapAt(testkit.Swap32GiBinKB, ratio))
		pressure := []float64{0.02, 0.08, 0.15, 0.23}[i]
		procfs.SetPSI(&testkit.PSI{SomeAvg10: pressure * 100, FullAvg10: pressure * 90, SomeTotal: 1000000, FullTotal: 500000})
		testkit.WaitFor(t, 20*time.Second, func() bool {
			_, body := testkit.MustDo(t, nil, "GET", r.base+"/api/v1/status", nil, "", "")
			var s struct {
				History []struct {
					UsedRatio float64  `json:"used_ratio"`
					Pressure  *float64 `json:"pressure_some_avg10"`
				}
			}
			if json.Unmarshal([]byte(body), &s) != nil {
				return false
			}
			atLevel := 0
			for _, h := range s.History {
				if math.Abs(h.UsedRatio-ratio) < 0.005 && h.Pressure != nil && math.Abs(*h.Pressure-pressure) < 0.001 {
					atLevel++
				}
			}
			return atLevel >= samplesPerLevel
		}, fmt.Sprintf("%d chart samples at swap %.0f%% and pressure %.0f%%", samplesPerLevel, ratio*100, pressure*100))
		samples += samplesPerLevel
	}
	// The 54 % push goes out on the watchdog's poll, apart from the chart's
	// samples: the page must be loaded after its BARK line is written.
	if !testkit.Poll(20*time.Second, func() bool {
		return strings.Contains(runlogtest.Text(t, r.logDir), " BARK swap 54% sent ok=1 fail=0\n")
	}) {
		t.Fatalf("gave up after 20s waiting for the swap push's BARK line; run log:\n%s\npushes: %q",
			runlogtest.Text(t, r.logDir), r.pushes())
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
	)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	// An alert() would open a dialog: count them, and close each so that
	// nothing blocks.
	var dialogs atomic.Int32
	opening := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range opening {
			if err != nil {
				return
			}
			dialogs.Add(1)
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()

	loaded := time.Now()
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(r.base+"/"),
		chromedp.WaitVisible(chromedp.ID("swap-chart")),
	); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text := browse(t, ctx, chromedp.Text(chromedp.CSS("body")))
	points := browse(t, ctx, chromedp.Evaluate[int](`document.querySelector('#swap-chart polyline.ratio').points.numberOfItems`))
	pressurePoints := browse(t, ctx, chromedp.Evaluate[int](`document.querySelector('#swap-chart polyline.pressure').points.numberOfItems`))
	// The pressure line is drawn in its own colour, not swap's.
	colours := browse(t, ctx, chromedp.Evaluate[[]string](`['polyline.ratio', 'polyline.pressure'].map(s => getComputedStyle(document.querySelector('#swap-chart ' + s)).stroke)`))
	scripts := browse(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('script').length`))
	// Every phase with a total has a progress bar at its step.
	bars := browse(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#phases tbody tr')].filter(r => r.querySelector('progress')).map(r => r.querySelector('td.name').textContent + ' ' + r.querySelector('progress').value + '/' + r.querySelector('progress').max)`))
	etas := browse(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#phases .eta')].map(e => e.closest('tr').querySelector('td.name').textContent + ': ' + e.textContent)`))
	stalled := browse(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#phases .badge.stalled')].map(e => e.closest('tr').querySelector('td.name').textContent + ' ' + e.closest('td').textContent)`))
	// The stalled mark stands out from a running phase's.
	badgeColours := browse(t, ctx, chromedp.Evaluate[[]string](`['.badge.stalled', '.badge.active'].map(s => getComputedStyle(document.querySelector('#phases ' + s)).color)`))
	// Each readable disk has a bar, drawn by the browser (a meter, no
	// inline style); the missing one says it is waited for.
	disks := browse(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#disks tbody tr')].map(r => r.querySelector('td.name code').textContent + ' ' + (r.querySelector('meter') ? r.querySelector('meter').getBoundingClientRect().width > 0 : 'no bar'))`))
	images := browse(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('img').length`))
	// The phone's first screen shows the run: the phases lead, and the
	// first running phase is within the 844 px of the viewport; nothing
	// is wider than the screen.
	firstSection := browse(t, ctx, chromedp.Evaluate[string](`document.querySelector('section').id`))
	runningBottom := browse(t, ctx, chromedp.Evaluate[float64](`[...document.querySelectorAll('#phases tbody tr')].find(r => r.querySelector('.badge.active')).getBoundingClientRect().bottom`))
	pageWidth := browse(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	// A name wraps between its words, never inside one that fits the
	// column: each word's text lies on one line.
	brokenWords := browse(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#phases td.name')].flatMap(td => {
		const text = td.firstChild, out = [];
		if (!text || text.nodeType !== Node.TEXT_NODE) return out;
		let at = 0;
		for (const word of text.data.split(' ')) {
			const range = document.createRange();
			range.setStart(text, at);
			range.setEnd(text, at + word.length);
			if (word.length <= 12 && new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1) out.push(word);
			at += word.length + 1;
		}
		return out;
	})`))
	phone := browse(t, ctx, chromedp.FullScreenshot(100))
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("swap-chart")),
	); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	desktop := browse(t, ctx, chromedp.FullScreenshot(100))

	for _, want := range []string{"54%", "17.3 of 32.0 GiB used", "memory pressure 23%", "at or above 10%", "Building model", "Pretrain 1/3", evil,
		"BARK swap 54% sent ok=1 fail=0", "phone.bark.env:1", "swap pushed since", "oom armed", "✓ ok", "✗ failed", "failed after", "200/5000", "1200/5000"} {
		if !strings.Contains(text, want) {
			t.Errorf("visible text lacks %q", want)
		}
	}
	if firstSection != "phases" || runningBottom <= 0 || runningBottom > 844 || pageWidth > 390 {
		t.Errorf("on a phone: first section %q, first running phase ends at %.0f px (want within 844), page %d px wide (want 390)",
			firstSection, runningBottom, pageWidth)
	}
	if len(brokenWords) != 0 {
		t.Errorf("phase names broken inside a word: %q", brokenWords)
	}
	// Running phases first (stalled ones on top, then the newest), then
	// the ended ones.
	wantBars := []string{"Data loader 50/100", "SFT 1200/5000", evil + " 1/2", "Pretrain 1/3 200/5000"}
	if strings.Join(bars, "|") != strings.Join(wantBars, "|") {
		t.Errorf("progress bars %q, want %q", bars, wantBars)
	}
	// Pretrain advanced twice: it has an ETA, as a duration and a clock
	// time; SFT's rate from before its stall gives one too.
	etaShape := regexp.MustCompile(`^(Pretrain 1/3|SFT): ETA \d+[hms]( \d+[ms])? · (\d{4}-\d\d-\d\d )?\d\d:\d\d$`)
	if len(etas) != 2 || !etaShape.MatchString(etas[0]) || !etaShape.MatchString(etas[1]) {
		t.Errorf("ETAs %q: want Pretrain's and SFT's, each a duration and a clock time", etas)
	}
	// The page writes a time of today as 15:04, of another day with its
	// date (an hour ago may be yesterday). Today is the day the page was
	// rendered on, which is the day it was loaded or, if midnight passed
	// since, the day now.
	wantStalled := func(today time.Time) []string {
		clock := func(t time.Time) string {
			if t.Format("2006-01-02") == today.Format("2006-01-02") {
				return t.Format("15:04")
			}
			return t.Format("2006-01-02 15:04")
		}
		return []string{
			"Data loader ⚠ stalled since " + clock(silentSince) + "no heartbeat for 1h",           // 1h 00m, unless the test ran long
			"SFT ⚠ stalled since " + clock(stepSince) + "pings, but the step has not moved for 4", // 40m
		}
	}
	marksFit := func(want []string) bool {
		return len(stalled) == 2 && strings.HasPrefix(stalled[0], want[0]) && strings.HasPrefix(stalled[1], want[1])
	}
	if !marksFit(wantStalled(loaded)) && !marksFit(wantStalled(time.Now())) {
		t.Errorf("stalled marks %q, want %q", stalled, wantStalled(loaded))
	}
	if len(badgeColours) != 2 || badgeColours[0] == badgeColours[1] {
		t.Errorf("stalled and running badges in colours %q: want two different ones", badgeColours)
	}
	if points < samples {
		t.Errorf("the swap chart has %d points, want at least %d", points, samples)
	}
	if pressurePoints < samples {
		t.Errorf("the pressure line has %d points, want at least %d", pressurePoints, samples)
	}
	if len(colours) != 2 || colours[0] == colours[1] || colours[1] == "none" {
		t.Errorf("line colours %q: want swap and pressure in two different colours", colours)
	}
	if want := []string{evilDisk + " true", "/nonexistent/run-7 no bar"}; strings.Join(disks, "|") != strings.Join(want, "|") {
		t.Errorf("disk rows %q, want %q", disks, want)
	}
	if images != 0 {
		t.Errorf("the disk named <img …> made %d img elements", images)
	}
	if !strings.Contains(text, "does not exist yet; watched once it appears") {
		t.Error("the missing disk does not say it is watched once it appears")
	}
	if scripts != 0 || dialogs.Load() != 0 {
		t.Errorf("the <script> phase name ran: %d script elements, %d dialogs", scripts, dialogs.Load())
	}

	dir := screenshotDir(t)
	for name, img := range map[string][]byte{"status-phone.png": phone, "status-desktop.png": desktop} {
		if len(img) == 0 {
			t.Errorf("no %s taken", name)
			continue
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, img, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
}

// browse runs one browser action and fails the test on error.
func browse[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return v
}
