package e2e

// Slow hardening tests: the 60 s load run, kill -9 with two other writers,
// slowloris, and (in storm_test.go) kill -9 of a bridge holding alerts. They take from several seconds to over a minute, so they
// run only with LAVENDER_SLOW=1 (.ci/run sets it).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

func needSlow(t *testing.T) {
	t.Helper()
	if os.Getenv("LAVENDER_SLOW") != "1" {
		t.Skip("slow test (load, kill -9 or slowloris): set LAVENDER_SLOW=1 to run it")
	}
}

// rssKiB reads VmRSS of pid from /proc.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// flatness returns the peak of the first two thirds of xs and the median
// of the last third.
func flatness(xs []float64) (peak, median float64) {
	cut := len(xs) - len(xs)/3
	for _, x := range xs[:cut] {
		peak = max(peak, x)
	}
	last := slices.Clone(xs[cut:])
	slices.Sort(last)
	return peak, last[len(last)/2]
}

// loadCounts tallies one kind of request.
type loadCounts struct {
	mu       sync.Mutex
	lat      []time.Duration
	sent     int
	codes    map[int]int
	errs     int
	firstErr string
}

func (c *loadCounts) timed(since time.Time, code int, err error) {
	c.mu.Lock()
	c.lat = append(c.lat, time.Since(since))
	c.mu.Unlock()
	c.add(code, err)
}

func (c *loadCounts) add(code int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.codes == nil {
		c.codes = map[int]int{}
	}
	c.sent++
	if err != nil {
		c.errs++
		if c.firstErr == "" {
			c.firstErr = err.Error()
		}
		return
	}
	c.codes[code]++
}

func (c *loadCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []int
	for k := range c.codes {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d×%d", c.codes[k], k))
	}
	lat := slices.Clone(c.lat)
	slices.Sort(lat)
	pct := func(q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(q*float64(len(lat)-1))].Round(time.Millisecond)
	}
	return fmt.Sprintf("sent %d: %s, transport errors %d %s; latency p50 %v p99 %v max %v",
		c.sent, strings.Join(parts, " "), c.errs, c.firstErr, pct(0.5), pct(0.99), pct(1))
}

// TestLoad is the load run docs/reliability.md reports: 60 s of 200 webhooks/s, 50 scrapes/s
// and 20 heartbeats/s together against a real `lavender serve` process with
// a healthy Bark stand-in. It shows no 5xx, flat RSS and goroutines, a run
// log within its cap at every sample, and every push accounted for in the
// counters and, through the compaction marker, in the run log.
func TestLoad(t *testing.T) {
	needSlow(t)
	t.Parallel() // beside TestKill9KeepsHeldAlertsAndDedup, which mostly waits
	duration := 60 * time.Second
	if s := os.Getenv("LAVENDER_LOAD_SECONDS"); s != "" { // shorter runs while developing
		n, err := strconv.Atoi(s)
		if err != nil || n < 3 {
			t.Fatalf("LAVENDER_LOAD_SECONDS=%q: want a whole number of seconds, at least 3", s)
		}
		duration = time.Duration(n) * time.Second
	}
	const webhookRate, scrapeRate, heartbeatRate = 200, 50, 20

	bark := barktest.New(t)
	barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.URL + "/KEY/$0\n"})
	logDir := t.TempDir()
	// The host's own /proc, as in production: a fake procfs on the same
	// disk as the run log would make scrapes wait on its journal.
	// Storm control off: every webhook is a push, which the test counts.
	serve := testkit.StartCommand(t, "serve", "--web.listen-address=127.0.0.1:0", "--path.procfs=/proc", "--watchdog.interval=0",
		"--runlog.dir="+logDir, "--bark.config-dir="+barkDir, "--bark.max-per-minute=0")
	base := serve.URL(t)
	testkit.WaitReady(t, nil, base, "", "")
	pid := serve.Pid()
	runPath, err := runlog.CurrentPath(logDir)
	if err != nil {
		t.Fatal(err)
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	post := func(path string, body []byte) (int, error) {
		resp, err := client.Post(base+path, "application/json", strings.NewReader(string(body)))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	var webhooks, scrapes, heartbeats loadCounts
	var logLines atomic.Int64 // START and END lines the heartbeats wrote
	var inflight sync.WaitGroup
	sem := make(chan struct{}, 256) // bounds the client's concurrency
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	start := time.Now()

	// pace fires n requests spread evenly over the duration.
	pace := func(rate int, fire func(i int)) {
		defer inflight.Done()
		total := rate * int(duration/time.Second)
		for i := range total {
			due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(due)):
			}
			sem <- struct{}{}
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				defer func() { <-sem }()
				fire(i)
			}()
		}
	}
	inflight.Add(3)
	go pace(webhookRate, func(i int) {
		t0 := time.Now()
		code, err := post("/webhook", testkit.SwapAlertWebhook(i))
		webhooks.timed(t0, code, err)
	})
	go pace(scrapeRate, func(i int) {
		t0 := time.Now()
		resp, err := client.Get(base + "/metrics")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			scrapes.timed(t0, resp.StatusCode, nil)
			return
		}
		scrapes.timed(t0, 0, err)
	})
	// Heartbeats: four phases pinging; every 50th heartbeat of a phase
	// ends it and starts it again, which writes END and START lines.
	var phaseMu [4]sync.Mutex
	for k := range phaseMu {
		code, err := post("/api/v1/heartbeat", fmt.Appendf(nil, `{"phase":"phase %d","event":"start"}`, k))
		heartbeats.add(code, err)
		if code == 200 {
			logLines.Add(1)
		}
	}
	go pace(heartbeatRate, func(i int) {
		k := i % 4
		phaseMu[k].Lock() // end and start of one phase must not cross
		defer phaseMu[k].Unlock()
		events := []string{"ping"}
		if i%50 == 49 {
			events = []string{"end", "start"}
		}
		for _, ev := range events {
			t0 := time.Now()
			code, err := post("/api/v1/heartbeat", fmt.Appendf(nil, `{"phase":"phase %d","event":"%s"}`, k, ev))
			heartbeats.timed(t0, code, err)
			if code == 200 && ev != "ping" {
				logLines.Add(1)
			}
		}
	})

	// Sample RSS and goroutines every second, the run log every 100 ms.
	var rss, goroutines []float64
	logSamples, logOver, logBad, maxLog := 0, 0, 0, 0
	var firstBad string
	tick := time.NewTicker(100 * time.Millisecond)
	for n := 0; ctx.Err() == nil; n++ {
		<-tick.C
		if data, err := os.ReadFile(runPath); err == nil {
			logSamples++
			maxLog = max(maxLog, len(data))
			if len(data) > runlog.DefaultMaxBytes {
				logOver++
			}
			if _, err := runlog.Parse(data); err != nil {
				logBad++
				if firstBad == "" {
					firstBad = err.Error()
				}
			}
		}
		if n%10 == 0 {
			rss = append(rss, float64(rssKiB(t, pid))/1024)
			if m, err := testkit.FetchMetrics(client, base+"/metrics", "", ""); err == nil {
				if n, err := m.Value("go_goroutines", nil); err == nil {
					goroutines = append(goroutines, n)
				}
			}
		}
	}
	tick.Stop()
	inflight.Wait()
	elapsed := time.Since(start)

	rate := func(c *loadCounts) float64 { return float64(c.sent) / elapsed.Seconds() }
	t.Logf("%v: webhooks %.0f/s (%s)", elapsed.Round(time.Millisecond), rate(&webhooks), &webhooks)
	t.Logf("scrapes %.0f/s (%s)", rate(&scrapes), &scrapes)
	t.Logf("heartbeats %.0f/s (%s)", rate(&heartbeats), &heartbeats)
	t.Logf("RSS MiB each second: %v", roundAll(rss))
	t.Logf("goroutines each second: %v", goroutines)
	t.Logf("run log: %d samples, largest %d bytes", logSamples, maxLog)

	for name, c := range map[string]*loadCounts{"webhooks": &webhooks, "scrapes": &scrapes, "heartbeats": &heartbeats} {
		for code, n := range c.codes {
			if code >= 500 {
				t.Errorf("%s: %d answers with %d", name, n, code)
			}
			if code != 200 {
				t.Errorf("%s: %d answers with %d, want 200 only", name, n, code)
			}
		}
		if c.errs > 0 {
			t.Errorf("%s: %d transport errors, first: %s", name, c.errs, c.firstErr)
		}
	}
	// The rates are the ones docs/reliability.md reports; a machine that cannot keep up
	// is reported rather than failed (no timed assertions), but the run must
	// have sent what it scheduled.
	for name, want := range map[string]int{"webhooks": webhookRate, "scrapes": scrapeRate, "heartbeats": heartbeatRate} {
		c := map[string]*loadCounts{"webhooks": &webhooks, "scrapes": &scrapes, "heartbeats": &heartbeats}[name]
		if got := rate(c); got < 0.9*float64(want) {
			t.Logf("NOTE: %s reached %.0f/s of the %d/s asked for", name, got, want)
		}
	}

	// Flat: the median of the last third may not exceed the high-water mark
	// of the first two thirds by more than the slack. A leak keeps climbing
	// past every earlier peak; a burst (this 2-core machine stalls for up to
	// a second when other work runs, and hundreds of requests then arrive at
	// once) only raises a plateau that Go's heap and the client's idle
	// connections keep for a while, which a max-versus-max rule would call
	// growth. RSS slack 16 MiB: a leak of 2 KiB per webhook would add 16 MiB
	// over the last third alone. Goroutine slack 16: a leak of one goroutine
	// per webhook would add thousands.
	for _, c := range []struct {
		name  string
		xs    []float64
		slack float64
		unit  string
	}{{"RSS", rss, 16, " MiB"}, {"goroutines", goroutines, 16, ""}} {
		if len(c.xs) < 6 {
			t.Errorf("only %d %s samples", len(c.xs), c.name)
			continue
		}
		peak, median := flatness(c.xs)
		t.Logf("%s: high-water mark of the first two thirds %.1f%s, median of the last third %.1f%s", c.name, peak, c.unit, median, c.unit)
		if median > peak+c.slack {
			t.Errorf("%s grew: last third's median %.1f%s is over the earlier peak %.1f%s plus %v", c.name, median, c.unit, peak, c.unit, c.slack)
		}
	}
	if logOver > 0 || logBad > 0 {
		t.Errorf("run log: %d of %d samples over the cap, %d did not parse (first: %s)", logOver, logSamples, logBad, firstBad)
	}

	// Every push is accounted for: Bark received one per webhook, the
	// counters say so, and so does the run log.
	pushed := webhooks.codes[200]
	if got := bark.Count(); got != pushed {
		t.Errorf("Bark received %d pushes for %d webhooks answered 200", got, pushed)
	}
	m := testkit.Scrape(t, client, base+"/metrics")
	for _, s := range []struct {
		name   string
		labels testkit.Labels
		want   int
	}{
		{"lavender_bark_pushes_total", testkit.Labels{"result": "ok", "target": "phone.bark.env:1"}, pushed},
		{"lavender_bark_pushes_total", testkit.Labels{"result": "failed", "target": "phone.bark.env:1"}, 0},
		{"lavender_webhook_requests_total", testkit.Labels{"code": "200"}, pushed},
		{"lavender_webhook_alerts_total", testkit.Labels{"action": "pushed", "status": "firing"}, pushed},
		{"lavender_runlog_write_errors_total", testkit.Labels{"writer": "bark"}, 0},
		{"lavender_runlog_write_errors_total", testkit.Labels{"writer": "exporter"}, 0},
	} {
		if got := m.MustValue(t, s.name, s.labels); got != float64(s.want) {
			t.Errorf("%s%v = %v, want %d", s.name, s.labels, got, s.want)
		}
	}
	// Stop cleanly, so the last entry is RUN stop. The run log holds at most
	// 1 KiB, so most BARK lines are compacted away; what is provable is that
	// the marker's dropped count plus the entries kept after the first
	// equals every line written: one per push, one per START/END, RUN stop.
	if err := serve.Stop(); err != nil {
		t.Errorf("serve after SIGTERM: %v", err)
	}
	data, err := os.ReadFile(runPath)
	if err != nil {
		t.Fatal(err)
	}
	f, err := runlog.Parse(data)
	if err != nil {
		t.Fatalf("final run log: %v\n%s", err, data)
	}
	dropped := uint64(0)
	if f.Marker != nil {
		dropped = f.Marker.Dropped
	}
	written := uint64(pushed) + uint64(logLines.Load()) + 1
	if got := dropped + uint64(len(f.Entries)); got != written {
		t.Errorf("run log accounts for %d entries (%d dropped + %d kept), want %d: %d pushes, %d START/END, RUN stop\n%s",
			got, dropped, len(f.Entries), written, pushed, logLines.Load(), data)
	}
	for _, e := range f.Entries {
		msg := e[len("15:04:05 "):]
		if !(msg == "BARK swap 54% sent ok=1 fail=0" || strings.HasPrefix(msg, "START phase ") ||
			strings.HasPrefix(msg, "END   phase ") || msg == "RUN stop") {
			t.Errorf("unexpected run-log entry %q", e)
		}
	}
	t.Logf("run log after the run (%d bytes): %d entries dropped over %d compactions, %d kept", len(data), dropped, markerRounds(f), len(f.Entries))
}

func markerRounds(f *runlog.File) uint64 {
	if f.Marker == nil {
		return 0
	}
	return f.Marker.Rounds
}

func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(int(x*10)) / 10
	}
	return out
}

// TestKill9WithTwoAppenders: `serve` is killed with SIGKILL three times
// while it writes BARK and START/END lines and two `lavender runlog append`
// processes append to the same run; after each kill it restarts with
// --run.resume. The run log parses and stays within the cap at every
// sample, and the appenders' newest lines survive.
func TestKill9WithTwoAppenders(t *testing.T) {
	needSlow(t)
	// Beside TestLoad, within its first 20 s or so: the load test's
	// flatness check compares its last third with what came before, so
	// CPU taken early only raises the earlier peak it is held to.
	t.Parallel()
	bin := testkit.Binary(t) // for the appenders
	bark := barktest.New(t)
	barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.URL + "/KEY/$0\n"})
	logDir := t.TempDir()
	args := []string{"serve", "--web.listen-address=127.0.0.1:0", "--path.procfs=" + testkit.SwapProcfs(t, 0.10),
		"--watchdog.interval=0", "--runlog.dir=" + logDir, "--bark.config-dir=" + barkDir, "--run.resume"}
	// startServe starts serve and returns its base URL once ready; the
	// test kills it, so the cleanup kills whatever is left.
	var serve *testkit.Command
	startServe := func() string {
		serve = testkit.StartCommandWith(t, testkit.Options{KillAtEnd: true}, args...)
		base := serve.URL(t)
		testkit.WaitReady(t, nil, base, "", "")
		return base
	}
	first := startServe()
	runPath, err := runlog.CurrentPath(logDir)
	if err != nil {
		t.Fatal(err)
	}

	const appends = 120
	stop := make(chan struct{})
	var writers sync.WaitGroup
	writerErrs := make(chan error, 2*appends)
	for _, w := range []string{"a", "b"} {
		writers.Go(func() {
			for i := range appends {
				out, err := exec.Command(bin, "runlog", "append", "--runlog.dir="+logDir, fmt.Sprintf("writer %s %04d", w, i)).CombinedOutput()
				if err != nil {
					writerErrs <- fmt.Errorf("writer %s append %d: %v %s", w, i, err, out)
				}
			}
		})
	}
	// serve's own writes: webhooks and phase events, until told to stop.
	var driver sync.WaitGroup
	var base atomic.Value
	base.Store(first)
	driver.Go(func() {
		client := &http.Client{Timeout: 5 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			b := base.Load().(string)
			if resp, err := client.Post(b+"/webhook", "application/json", strings.NewReader(string(testkit.SwapAlertWebhook(i)))); err == nil {
				resp.Body.Close()
			}
			ev := []string{"start", "end"}[i%2]
			if resp, err := client.Post(b+"/api/v1/heartbeat", "application/json", strings.NewReader(`{"phase":"P","event":"`+ev+`"}`)); err == nil {
				resp.Body.Close()
			}
		}
	})

	samples, over, bad := 0, 0, 0
	var firstBad string
	check := func() {
		data, err := os.ReadFile(runPath)
		if err != nil {
			t.Fatal(err)
		}
		samples++
		if len(data) > runlog.DefaultMaxBytes {
			over++
		}
		if _, err := runlog.Parse(data); err != nil {
			bad++
			if firstBad == "" {
				firstBad = fmt.Sprintf("%v\n%s", err, data)
			}
		}
	}
	writersDone := make(chan struct{})
	go func() { writers.Wait(); close(writersDone) }()
	kills := 0
	next := time.Now().Add(500 * time.Millisecond)
	deadline := time.Now().Add(3 * time.Minute)
loop:
	for {
		select {
		case <-writersDone:
			break loop
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("appenders did not finish within 3 minutes")
		}
		check()
		if kills < 3 && time.Now().After(next) {
			serve.Signal(syscall.SIGKILL)
			<-serve.Done()
			kills++
			check()
			base.Store(startServe())
			next = time.Now().Add(700 * time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	driver.Wait()
	close(writerErrs)
	for err := range writerErrs {
		t.Error(err)
	}
	check()
	t.Logf("%d kills; %d samples of the run log; Bark got %d pushes", kills, samples, bark.Count())
	if kills < 3 {
		t.Errorf("only %d kills happened before the appenders finished", kills)
	}
	if over > 0 || bad > 0 {
		t.Errorf("%d of %d samples over the cap, %d did not parse; first: %s", over, samples, bad, firstBad)
	}
	if now, _ := runlog.CurrentPath(logDir); now != runPath {
		t.Errorf("the run changed to %s", now)
	}
	// Lines kept are whole, in each writer's order, and none is doubled.
	data, _ := os.ReadFile(runPath)
	f, err := runlog.Parse(data)
	if err != nil {
		t.Fatalf("final run log: %v\n%s", err, data)
	}
	last := map[string]int{"a": -1, "b": -1}
	for _, e := range f.AllEntries() {
		var w string
		var i int
		if n, _ := fmt.Sscanf(e[len("15:04:05 "):], "writer %s %d", &w, &i); n == 2 {
			if i <= last[w] {
				t.Errorf("writer %s: line %d after line %d", w, i, last[w])
			}
			last[w] = i
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(logDir, ".*tmp-*"))
	t.Logf("temp files left by kills mid-write: %d (ignored by readers, never picked as the current run)", len(leftovers))
}

// TestSlowloris: 400 connections send a request's headers one byte a
// second. A normal client is answered while they hang on, the server
// closes every one of them once ReadHeaderTimeout passes, and its
// goroutines return to where they were.
func TestSlowloris(t *testing.T) {
	needSlow(t)
	t.Parallel() // its own serve process, whose goroutines alone it counts
	serve := testkit.StartCommand(t, "serve", "--web.listen-address=127.0.0.1:0", "--path.procfs="+testkit.SwapProcfs(t, 0.10),
		"--watchdog.interval=0", "--runlog.dir="+t.TempDir(), "--bark.config-dir="+barktest.ConfigDir(t, nil))
	base := serve.URL(t)
	testkit.WaitReady(t, nil, base, "", "")
	goroutines := func() float64 {
		return testkit.Scrape(t, nil, base+"/metrics").MustValue(t, "go_goroutines", nil)
	}
	before := goroutines()

	const conns = 400
	addr := strings.TrimPrefix(base, "http://")
	closedAt := make(chan time.Duration, conns)
	opened := time.Now()
	var wg sync.WaitGroup
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Go(func() {
			// Notice the server's close: a read returns EOF or a reset.
			go func() {
				buf := make([]byte, 1)
				c.SetReadDeadline(time.Now().Add(60 * time.Second))
				c.Read(buf)
				closedAt <- time.Since(opened)
			}()
			c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n"))
			for i := 0; i < 60; i++ {
				if _, err := c.Write([]byte("X")); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
		})
	}
	time.Sleep(time.Second) // all connections are in and dribbling
	during := goroutines()
	client := &http.Client{Timeout: 10 * time.Second}
	for _, path := range []string{"/metrics", "/-/healthy", "/api/v1/phases"} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s while %d slow clients hang on: %v", path, conns, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s while slow clients hang on: %d", path, resp.StatusCode)
		}
	}
	if code, body := testkit.MustDo(t, nil, "POST", base+"/api/v1/heartbeat", []byte(`{"phase":"Train","event":"start"}`), "", ""); code != 200 {
		t.Errorf("heartbeat while slow clients hang on: %d %s", code, body)
	}

	var latest time.Duration
	for range conns {
		select {
		case d := <-closedAt:
			latest = max(latest, d)
		case <-time.After(60 * time.Second):
			t.Fatal("some slow connections were never closed by the server")
		}
	}
	wg.Wait()
	// The bound is the spec's: ReadHeaderTimeout, plus slack for a loaded
	// machine to get round to 400 timers.
	if bound := app.ServingTimeouts.ReadHeader + 10*time.Second; latest > bound {
		t.Errorf("the last slow connection was closed after %v, over %v", latest, bound)
	}
	var after float64
	testkit.WaitFor(t, 20*time.Second, func() bool {
		after = goroutines()
		return after <= before+10
	}, "goroutines back to where they were")
	t.Logf("goroutines: %v before, %v with %d slow clients, %v after; all closed within %v", before, during, conns, after, latest.Round(time.Millisecond))
}
