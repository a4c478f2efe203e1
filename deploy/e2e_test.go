package deploy

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestE2E runs the whole chain the deploy files describe, with real
// programs: `lavender serve` on a fake procfs showing 54 % swap, Debian's
// Prometheus with alerts.yml, Debian's Alertmanager, and a Bark-compatible
// server. After the swap alert and its resolution, an OOM kill (vmstat's
// oom_kill rising) fires OOMKill, which reaches the phone in the watchdog's
// words. It runs twice at once: once with the shipped configs as they are,
// and once with their commented-out basic-auth blocks enabled and lavender
// behind --web.config.file. Each run takes about 40s, almost all of it
// SwapUsageHigh's `for: 30s`, which the test keeps as shipped.
func TestE2E(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: runs lavender, Prometheus and Alertmanager for about a minute")
	}
	bins := e2eBinaries{
		prometheus:   testkit.NeedTool(t, "prometheus", "prometheus"),
		alertmanager: needAlertmanager(t),
		lavender:     testkit.Binary(t), // built with -race when the tests run with it
	}
	// The shipped chain pushes resolutions (--bark.send-resolved, as the
	// deploy files run lavender), so the phone's notification of an incident
	// is replaced by its end; the second one shows that without the flag a
	// resolution is only counted.
	modes := []struct {
		name                    string
		basicAuth, sendResolved bool
	}{
		{"shipped", false, true},
		{"basic_auth", true, false},
	}
	// The two chains run at the same time, so their ports are chosen together.
	addrs := testkit.FreeAddrs(t, 3*len(modes))
	for i, mode := range modes {
		a := e2eAddrs{lavender: addrs[3*i], prometheus: addrs[3*i+1], alertmanager: addrs[3*i+2]}
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			runE2E(t, bins, a, mode.basicAuth, mode.sendResolved)
		})
	}
}

// e2eAddrs are one chain's listen addresses, host:port on 127.0.0.1.
type e2eAddrs struct{ lavender, prometheus, alertmanager string }

type e2eBinaries struct{ prometheus, alertmanager, lavender string }

// needAlertmanager finds Debian's prometheus-alertmanager, or upstream's
// alertmanager for developers who installed it by hand.
func needAlertmanager(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"prometheus-alertmanager", "alertmanager"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return testkit.NeedTool(t, "prometheus-alertmanager", "prometheus-alertmanager")
}

const (
	// e2eWant54 is the swap push for 54 % of 32 GiB, as the predecessor
	// wrote it; the test also derives it from the figures it writes.
	e2eWant54 = "[lavender-2] swap 54% full (17.3/32.0 GB) — consider intervening"
	// e2ePushBudget is how long the chain may take from lavender's start to
	// the push: Prometheus's first scrapes, SwapUsageHigh's `for` (e2eSwapFor),
	// Alertmanager's group_wait, and slack for a busy 2-core machine.
	e2ePushBudget = 60 * time.Second
	// e2eQuiet is how long the test watches for an unwanted push.
	e2eQuiet = 3 * time.Second
)

// e2eCreds are basic-auth credentials; zero means none.
type e2eCreds struct{ user, password string }

// e2eChain is one running chain and what the test asks of it.
type e2eChain struct {
	t          *testing.T
	procs      []*testkit.Command
	client     *http.Client
	lavender   string   // base URL
	lavAddr    string   // host:port, the instance label
	creds      e2eCreds // what Prometheus scrapes lavender with
	prometheus string   // base URL
	am         string   // base URL
	bark       *barktest.Server
	runlogDir  string
}

func runE2E(t *testing.T, bins e2eBinaries, addrs e2eAddrs, basicAuth, sendResolved bool) {
	start := time.Now()
	dir := t.TempDir()
	c := &e2eChain{t: t, client: &http.Client{Timeout: 5 * time.Second}, runlogDir: t.TempDir()}

	// Two OOM kills since boot and PSI's counters, so the OOM rule has a
	// base and the pressure panels data.
	procfs := testkit.NewProcfs(t, testkit.Host{OOMKills: 2, PSI: &testkit.PSI{SomeTotal: 1500000, FullTotal: 500000}})
	high := procfs.SetSwap(testkit.SwapAt(testkit.Swap32GiBinKB, 0.54))
	want := fmt.Sprintf("[lavender-2] swap %d%% full (%.1f/%.1f GB) — consider intervening",
		int(math.Round(high.Ratio()*100)), float64(high.UsedBytes())/(1<<30), float64(high.TotalBytes())/(1<<30))
	if want != e2eWant54 {
		t.Fatalf("fake meminfo gives %q, want the predecessor's %q: fix the test's figures", want, e2eWant54)
	}

	c.bark = barktest.New(t)
	barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": c.bark.Template(barktest.Key) + "\n"})

	c.lavAddr = addrs.lavender
	promAddr, amAddr := addrs.prometheus, addrs.alertmanager
	c.lavender, c.prometheus, c.am = "http://"+c.lavAddr, "http://"+promAddr, "http://"+amAddr

	serveArgs := []string{"serve", "--watchdog.interval=0", "--web.listen-address=" + c.lavAddr,
		"--path.procfs=" + procfs.Dir, "--runlog.dir=" + c.runlogDir, "--bark.config-dir=" + barkDir}
	if sendResolved {
		serveArgs = append(serveArgs, "--bark.send-resolved")
	}
	// Pushes before the OOM kill: the swap push, and its resolution when
	// lavender pushes resolutions.
	swapPushes := 1
	if sendResolved {
		swapPushes = 2
	}
	var webhookPasswordFile, scrapePasswordFile string
	if basicAuth {
		c.creds = e2eCreds{e2eScrapeUser, randomPassword(t)}
		webhook := e2eCreds{e2eWebhookUser, randomPassword(t)}
		webConfig := testkit.WriteWebConfig(t, testkit.WebConfig{Users: map[string]string{
			c.creds.user: c.creds.password, webhook.user: webhook.password}})
		serveArgs = append(serveArgs, "--web.config.file="+webConfig)
		scrapePasswordFile = filepath.Join(dir, "prometheus.password")
		webhookPasswordFile = filepath.Join(dir, "alertmanager.password")
		writeE2EFile(t, scrapePasswordFile, c.creds.password+"\n")
		writeE2EFile(t, webhookPasswordFile, webhook.password+"\n")
	}
	c.procs = append(c.procs, testkit.StartProgram(t, testkit.Options{Dir: dir}, bins.lavender, serveArgs...))
	deadline := start.Add(e2ePushBudget)
	c.waitUntil(deadline, "lavender ready", func() bool { return c.status("GET", c.lavender+"/-/ready", c.creds, "") == 200 })

	// A running phase, so that the dashboard's phase panels have data too:
	// it reports steps, and two advancing pings give it a rate, so the
	// progress table's ETA has data as well.
	for _, hb := range []string{
		`{"phase":"Pretrain 1/3","event":"start","step":0,"total":5000}`,
		`{"phase":"Pretrain 1/3","event":"ping","step":100}`,
		`{"phase":"Pretrain 1/3","event":"ping","step":200,"loss":2.5}`,
	} {
		if code := c.status("POST", c.lavender+"/api/v1/heartbeat", c.creds, hb); code != 200 {
			t.Fatalf("heartbeat %s: HTTP %d", hb, code)
		}
	}
	if basicAuth {
		// The auth is real: without the right password neither the scrape
		// nor the webhook gets through.
		for _, r := range []struct {
			method, path string
			creds        e2eCreds
		}{
			{"GET", "/metrics", e2eCreds{}},
			{"GET", "/metrics", e2eCreds{e2eScrapeUser, "wrong"}},
			{"POST", "/webhook", e2eCreds{}},
			{"POST", "/webhook", e2eCreds{e2eWebhookUser, c.creds.password}},
		} {
			if code := c.status(r.method, c.lavender+r.path, r.creds, `{"version":"4","status":"firing","alerts":[]}`); code != http.StatusUnauthorized {
				t.Errorf("%s %s as %q: HTTP %d, want 401", r.method, r.path, r.creds.user, code)
			}
		}
	}

	amConfig := e2eAlertmanagerConfig(t, c.lavender+"/webhook")
	if basicAuth {
		amConfig = e2eAlertmanagerBasicAuth(t, amConfig, webhookPasswordFile)
	}
	writeE2EFile(t, filepath.Join(dir, "alertmanager.yml"), string(amConfig))
	c.procs = append(c.procs, testkit.StartProgram(t, testkit.Options{Dir: dir}, bins.alertmanager,
		"--config.file="+filepath.Join(dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(dir, "alertmanager-data"),
		"--web.listen-address="+amAddr,
		"--cluster.listen-address=", // alone, no gossip port
		"--log.level=debug",         // its notification log is the first thing to read on failure
	))

	promConfig := e2ePrometheusConfig(t, c.lavAddr, amAddr, e2eAlerts(t, dir))
	if basicAuth {
		promConfig = e2ePrometheusBasicAuth(t, promConfig, scrapePasswordFile)
	}
	writeE2EFile(t, filepath.Join(dir, "prometheus.yml"), string(promConfig))
	c.procs = append(c.procs, testkit.StartProgram(t, testkit.Options{Dir: dir}, bins.prometheus,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "prometheus-data"),
		"--web.listen-address="+promAddr,
		// Alerts produced before Prometheus has found its Alertmanager are
		// dropped and, by default, sent again only a minute later.
		"--rules.alert.resend-delay=1s",
	))
	c.waitUntil(deadline, "Alertmanager ready", func() bool { return c.status("GET", c.am+"/-/ready", e2eCreds{}, "") == 200 })
	c.waitUntil(deadline, "Prometheus ready", func() bool { return c.status("GET", c.prometheus+"/-/ready", e2eCreds{}, "") == 200 })

	// 54 %: exactly one silent push with the exact text.
	c.waitUntil(deadline, "the swap push", func() bool { return c.bark.Count() > 0 })
	t.Logf("push arrived %.1fs after lavender started", time.Since(start).Seconds())
	c.checkFirstPush(want, 1)
	c.waitUntil(time.Now().Add(10*time.Second), "the BARK line in the run log", func() bool {
		return strings.Contains(c.runLog(), " BARK swap 54% sent ok=1 fail=0\n")
	})
	c.expectNoMorePushes(e2eQuiet)
	c.checkFirstPush(want, 1)

	// 20 %: the alert resolves, Alertmanager tells lavender (send_resolved),
	// and lavender, without --bark.send-resolved, pushes nothing; with it,
	// it pushes the resolution with the firing push's id, which replaces
	// that notification on the phone.
	low := procfs.SetSwap(testkit.SwapAt(testkit.Swap32GiBinKB, 0.20))
	dropped := time.Now()
	c.waitUntil(dropped.Add(30*time.Second), "SwapUsageHigh to resolve and its notification to reach lavender", func() bool {
		c.failOnExtraPush(swapPushes)
		return !c.promHasAlert("SwapUsageHigh") && !c.amHasAlert("SwapUsageHigh") &&
			c.resolvedAlerts() >= 1
	})
	t.Logf("resolved %.1fs after swap dropped to 20%%", time.Since(dropped).Seconds())
	if sendResolved {
		c.waitUntil(time.Now().Add(10*time.Second), "the resolved push", func() bool { return c.bark.Count() >= 2 })
	}
	c.expectNoMorePushes(e2eQuiet)
	c.checkFirstPush(want, swapPushes)
	if sendResolved {
		c.checkResolvedPush()
	} else if n := c.lavenderMetrics().MustValue(t, "lavender_webhook_alerts_total", testkit.Labels{"status": "resolved", "action": "skipped"}); n < 1 {
		t.Errorf("lavender_webhook_alerts_total{status=\"resolved\",action=\"skipped\"} = %v, want >= 1", n)
	}
	c.checkRunLog(sendResolved)
	c.checkLavenderCounters(swapPushes)

	c.checkDashboard(low)

	// An OOM kill (vmstat's oom_kill 2 -> 3) during the running phase:
	// OOMKill fires at once, and the bridge pushes the watchdog's text from
	// its annotations. Near the end, since the other checks count one push.
	procfs.SetOOMKills(3)
	killed := time.Now()
	wantOOM := fmt.Sprintf(`[lavender-2] OOM killer struck (1 kill), victim unknown — swap %d%% full (%.1f/%.1f GB)`,
		int(math.Round(low.Ratio()*100)), float64(low.UsedBytes())/(1<<30), float64(low.TotalBytes())/(1<<30))
	c.waitUntil(killed.Add(30*time.Second), "the OOM push", func() bool { return c.bark.Count() > swapPushes })
	t.Logf("OOM push arrived %.1fs after the kill", time.Since(killed).Seconds())
	c.waitUntil(time.Now().Add(10*time.Second), "the BARK oom line in the run log", func() bool {
		return strings.Contains(c.runLog(), " BARK oom 1 kill sent ok=1 fail=0\n")
	})
	if got := c.bark.Pushes(); len(got) != swapPushes+1 || got[swapPushes].Body != wantOOM {
		t.Errorf("pushes after the kill: %+v\nwant the second: %q", got, wantOOM)
	}

	// The running phase's loss turns NaN: Prometheus keeps the NaN, its
	// template prints it, and the bridge words PhaseLossNotFinite as the
	// watchdog's loss push (the watchdog is off here).
	if code := c.status("POST", c.lavender+"/api/v1/heartbeat", c.creds, `{"phase":"Pretrain 1/3","event":"ping","step":300,"loss":"NaN"}`); code != 200 {
		t.Fatalf("NaN heartbeat: HTTP %d", code)
	}
	diverged := time.Now()
	const wantLoss = `[lavender-2] phase "Pretrain 1/3" loss is NaN at step 300/5000 — training diverged`
	c.waitUntil(diverged.Add(30*time.Second), "the loss push", func() bool { return c.bark.Count() > swapPushes+1 })
	t.Logf("loss push arrived %.1fs after the NaN heartbeat", time.Since(diverged).Seconds())
	c.waitUntil(time.Now().Add(10*time.Second), "the BARK loss line in the run log", func() bool {
		return strings.Contains(c.runLog(), " BARK loss Pretrain 1/3 sent ok=1 fail=0\n")
	})
	if got := c.bark.Pushes(); len(got) != swapPushes+2 || got[swapPushes+1].Body != wantLoss {
		t.Errorf("pushes after the NaN loss: %+v\nwant the last: %q", got, wantLoss)
	}
	c.checkAlive() // none may have exited on its own while the test needed it
	t.Logf("chain done %.1fs after lavender started", time.Since(start).Seconds())
}

// checkFirstPush: Bark got exactly n requests, the first the swap message,
// silent, with the slash percent-encoded so that Bark does not split the
// text, the incident's id, and the alert's host as its group.
func (c *e2eChain) checkFirstPush(want string, n int) {
	c.t.Helper()
	got := c.bark.Pushes()
	if len(got) != n {
		c.t.Fatalf("Bark received %d requests, want exactly %d:\n%+v", len(got), n, got)
	}
	p := got[0]
	if p.DeviceKey != barktest.Key || p.Title != "" || p.Subtitle != "" || p.Body != want {
		c.t.Fatalf("Bark push = key %q title %q subtitle %q body %q, want body %q alone\nraw URI %s",
			p.DeviceKey, p.Title, p.Subtitle, p.Body, want, p.RequestURI)
	}
	path, query, _ := strings.Cut(p.RequestURI, "?")
	if !strings.HasPrefix(query, "level=passive&isArchive=0&") {
		c.t.Errorf("push query %q, want level=passive&isArchive=0 (silent, not archived) first: %s", query, p.RequestURI)
	}
	if q := pushQuery(c.t, p); len(q.Get("id")) != 16 || q.Get("group") != "127.0.0.1" {
		c.t.Errorf("push id %q group %q, want the incident's id and the instance's host", q.Get("id"), q.Get("group"))
	}
	if !strings.Contains(path, "17.3%2F32.0") || strings.Contains(path, "+") {
		c.t.Errorf("push path %q: the slash must be %%2F and no raw +", path)
	}
}

// resolvedSwapPush is the whole resolution the bridge pushes: Prometheus
// sends it with the figures of the alert's last firing evaluation (54 %),
// so it says swap is back under alerts.yml's threshold, and no figure.
var resolvedSwapPush = regexp.MustCompile(`^\[lavender-2\] resolved: swap back under 45% after [0-9]+[dhms]([0-9]+[hms])?$`)

// checkResolvedPush: the second push is the resolution, saying how long the
// incident lasted and no figure from before swap fell, with the firing
// push's id, so it replaces it.
func (c *e2eChain) checkResolvedPush() {
	c.t.Helper()
	got := c.bark.Pushes()
	firing, resolved := got[0], got[1]
	if !resolvedSwapPush.MatchString(resolved.Body) {
		c.t.Errorf("resolved push %q, want \"[lavender-2] resolved: swap back under 45%% after …\"", resolved.Body)
	}
	if id := pushQuery(c.t, firing).Get("id"); id == "" || pushQuery(c.t, resolved).Get("id") != id {
		c.t.Errorf("firing push id %q, resolved push id %q: want one id", id, pushQuery(c.t, resolved).Get("id"))
	}
}

// pushQuery is the query of a push's request URI, as Bark reads it.
func pushQuery(t *testing.T, p barktest.Push) url.Values {
	t.Helper()
	u, err := url.ParseRequestURI(p.RequestURI)
	if err != nil {
		t.Fatalf("push URI %q: %v", p.RequestURI, err)
	}
	return u.Query()
}

// expectNoMorePushes watches Bark for d and fails at the first extra push.
func (c *e2eChain) expectNoMorePushes(d time.Duration) {
	c.t.Helper()
	before := c.bark.Count()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		c.failOnExtraPush(before)
		c.checkAlive()
	}
	c.failOnExtraPush(before)
}

// failOnExtraPush fails at once if Bark has more than want requests.
func (c *e2eChain) failOnExtraPush(want int) {
	c.t.Helper()
	if got := c.bark.Pushes(); len(got) > want {
		c.t.Fatalf("an unexpected push arrived: %+v", got[want:])
	}
}

// checkRunLog: one BARK line for the one push, and one for the resolution
// when it was pushed.
func (c *e2eChain) checkRunLog(resolvedPushed bool) {
	c.t.Helper()
	log := c.runLog()
	want := 1
	if resolvedPushed {
		want = 2
		if !strings.Contains(log, " BARK resolved swap ") {
			c.t.Errorf("run log lacks the resolution's BARK line:\n%s", log)
		}
	}
	if n := strings.Count(log, " BARK "); n != want || !strings.Contains(log, " BARK swap 54% sent ok=1 fail=0\n") {
		c.t.Errorf("run log has %d BARK lines, want %d with \"BARK swap 54%% sent ok=1 fail=0\":\n%s", n, want, log)
	}
}

// checkLavenderCounters: lavender's own account agrees with what Bark saw,
// and every webhook request (firing, resolved) was answered 200.
func (c *e2eChain) checkLavenderCounters(pushes int) {
	c.t.Helper()
	metrics := c.lavenderMetrics()
	for _, m := range []struct {
		name   string
		labels testkit.Labels
		want   func(float64) bool
		desc   string
	}{
		{"lavender_bark_pushes_total", testkit.Labels{"result": "ok"}, func(v float64) bool { return v == float64(pushes) }, strconv.Itoa(pushes)},
		{"lavender_bark_pushes_total", testkit.Labels{"result": "failed"}, func(v float64) bool { return v == 0 }, "0"},
		{"lavender_webhook_requests_total", testkit.Labels{"code": "200"}, func(v float64) bool { return v >= 2 }, ">= 2 (firing and resolved)"},
		{"lavender_webhook_requests_total", testkit.Labels{"code": "400"}, func(v float64) bool { return v == 0 }, "0"},
		{"lavender_webhook_requests_total", testkit.Labels{"code": "503"}, func(v float64) bool { return v == 0 }, "0"},
	} {
		// One series each: a missing one is an error, not a zero.
		if v := metrics.MustValue(c.t, m.name, m.labels); !m.want(v) {
			c.t.Errorf("%s%v = %v, want %s", m.name, m.labels, v, m.desc)
		}
	}
}

// checkDashboard runs every expression of the Grafana dashboard against
// this Prometheus, as Grafana would for job "lavender" and all instances.
// Every one must run without error or warning and, after a run with a
// push, a webhook and a running phase with steps, return data; the swap
// panels must show the figures the fake procfs holds now, and the progress
// panel the steps the phase reported.
func (c *e2eChain) checkDashboard(now testkit.Swap) {
	c.t.Helper()
	// $__rate_interval is at least four scrape intervals in Grafana; 1m
	// is what it gives for the shipped 15s and holds every sample here.
	const rateInterval = "1m"
	values := map[string]map[string]float64{} // panel -> refId -> value
	for _, e := range dashboardExprs(c.t) {
		expr := expandGrafanaVars(e.Expr, rateInterval)
		samples, err := c.promQuery(expr)
		if err != nil {
			c.t.Errorf("panel %q %s: %s: %v", e.Panel, e.RefID, expr, err)
			continue
		}
		if len(samples) == 0 {
			// The kernel-log fault counters get a series only with the
			// first fault, and this host has none: the query ran, which
			// is what can be checked here (TestServePushesEveryKernelFaultForm
			// counts every form).
			if e.Panel == "GPU faults" || e.Panel == "Storage errors" {
				continue
			}
			// The NVML panels have series only on a host with a GPU and
			// its driver; this one has none, which the telemetry panel,
			// checked below, says.
			if strings.HasPrefix(e.Panel, "GPU ") && e.Panel != "GPU telemetry" {
				continue
			}
			c.t.Errorf("panel %q %s returns no data: %s", e.Panel, e.RefID, expr)
			continue
		}
		for _, s := range samples {
			if s.instance != "" && s.instance != c.lavAddr {
				c.t.Errorf("panel %q %s: instance %q, want %q", e.Panel, e.RefID, s.instance, c.lavAddr)
			}
		}
		if values[e.Panel] == nil {
			values[e.Panel] = map[string]float64{}
		}
		values[e.Panel][e.RefID] = samples[0].value
	}
	for _, w := range []struct {
		panel, ref string
		want       float64
	}{
		{"Swap used", "A", now.Ratio()},
		{"GPU telemetry", "A", 0}, // off here: no driver (or no cgo), and it says so
		{"Swap bytes", "A", float64(now.UsedBytes())},
		{"Swap bytes", "C", float64(now.TotalBytes())},
		{"Swap in/out rate", "A", 0}, // the fake vmstat stands still
		{"Swap in/out rate", "B", 0},
		{"Memory pressure", "A", 0}, // the fake PSI totals stand still
		{"Memory pressure", "B", 0},
		{"OOM kills", "A", 0},                 // 2 kills since boot, none while scraped
		{"Phase progress", "A", 200.0 / 5000}, // the pings above
		{"Phase progress", "B", 200},
		{"Phase progress", "C", 5000},
		{"Training loss", "A", 2.5},
		{"Unreadable disks", "A", 0}, // /dev/shm, read
	} {
		got, ok := values[w.panel][w.ref]
		if !ok {
			c.t.Errorf("panel %q %s: no value (missing panel or no data)", w.panel, w.ref)
		} else if math.Abs(got-w.want) > 1e-9*math.Max(1, math.Abs(w.want)) {
			c.t.Errorf("panel %q %s = %v, want %v", w.panel, w.ref, got, w.want)
		}
	}
	for _, panel := range []string{"Disk space free", "Disk inodes free"} {
		if v := values[panel]["A"]; !(v > 0 && v <= 1) {
			c.t.Errorf("panel %q A (/dev/shm) = %v, want a share in (0, 1]", panel, v)
		}
	}
	// 4800 steps to go at a rate the two pings set: some positive ETA.
	if eta := values["Phase progress"]["D"]; !(eta > 0) {
		c.t.Errorf("panel \"Phase progress\" D (ETA) = %v, want > 0", eta)
	}
}

// waitUntil polls cond every 100ms until it holds; past deadline, or when
// a child process has died, it fails with the state of the chain.
func (c *e2eChain) waitUntil(deadline time.Time, what string, cond func() bool) {
	c.t.Helper()
	if !testkit.Poll(time.Until(deadline), func() bool { c.checkAlive(); return cond() }) {
		c.t.Fatalf("gave up waiting for %s\n%s", what, c.diagnose())
	}
}

func (c *e2eChain) checkAlive() {
	c.t.Helper()
	for _, p := range c.procs {
		if p.Exited() {
			c.t.Fatalf("%s exited: %v (its output follows)", p, p.Wait(time.Second)) // it has exited: Wait returns at once
		}
	}
}

// diagnose describes where the chain stands, for a failure message.
func (c *e2eChain) diagnose() string {
	var b strings.Builder
	for _, u := range []string{
		c.prometheus + "/api/v1/targets",
		c.prometheus + "/api/v1/alerts",
		c.am + "/api/v2/alerts",
	} {
		_, body, err := testkit.Do(c.client, "GET", u, nil, "", "")
		fmt.Fprintf(&b, "%s: %s %v\n", u, testkit.Tail(body, 2000), err)
	}
	_, body, err := testkit.Do(c.client, "GET", c.lavender+"/metrics", nil, c.creds.user, c.creds.password)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "lavender_webhook_") || strings.HasPrefix(line, "lavender_bark_pushes_total") ||
			strings.HasPrefix(line, "lavender_swap_used_ratio") {
			fmt.Fprintln(&b, line)
		}
	}
	fmt.Fprintf(&b, "lavender /metrics err: %v\nBark requests: %+v\n", err, c.bark.Pushes())
	return b.String()
}

// status is the status code of one request, 0 when it failed (a process
// that is still starting refuses connections).
func (c *e2eChain) status(method, u string, creds e2eCreds, body string) int {
	code, _, err := testkit.Do(c.client, method, u, []byte(body), creds.user, creds.password)
	if err != nil {
		return 0
	}
	return code
}

// lavenderMetrics scrapes lavender with the chain's credentials.
func (c *e2eChain) lavenderMetrics() testkit.Metrics {
	c.t.Helper()
	m, err := testkit.FetchMetrics(c.client, c.lavender+"/metrics", c.creds.user, c.creds.password)
	if err != nil {
		c.t.Fatalf("lavender /metrics: %v", err)
	}
	return m
}

// resolvedAlerts is how many resolved alerts lavender's webhook has had.
func (c *e2eChain) resolvedAlerts() float64 {
	c.t.Helper()
	n, err := c.lavenderMetrics().Sum("lavender_webhook_alerts_total", testkit.Labels{"status": "resolved"})
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

func (c *e2eChain) runLog() string {
	c.t.Helper()
	return runlogtest.Text(c.t, c.runlogDir)
}

// promAPI decodes a Prometheus HTTP API answer; errors and warnings are
// both failures.
func (c *e2eChain) promAPI(path string, data any) error {
	code, body, err := testkit.Do(c.client, "GET", c.prometheus+path, nil, "", "")
	if err != nil {
		return err
	}
	var resp struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Warnings  []string        `json:"warnings"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		return fmt.Errorf("HTTP %d, not JSON: %s", code, testkit.Tail(body, 500))
	}
	if resp.Status != "success" || code != 200 {
		return fmt.Errorf("HTTP %d %s: %s: %s", code, resp.Status, resp.ErrorType, resp.Error)
	}
	if len(resp.Warnings) > 0 {
		return fmt.Errorf("warnings: %s", strings.Join(resp.Warnings, "; "))
	}
	return json.Unmarshal(resp.Data, data)
}

type e2eSample struct {
	instance string
	value    float64
}

func (c *e2eChain) promQuery(expr string) ([]e2eSample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := c.promAPI("/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", data.ResultType)
	}
	var out []e2eSample
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("sample value %v: %w", r.Value[1], err)
		}
		out = append(out, e2eSample{instance: r.Metric["instance"], value: v})
	}
	return out, nil
}

// promHasAlert: Prometheus has the alert pending or firing.
func (c *e2eChain) promHasAlert(name string) bool {
	c.t.Helper()
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	if err := c.promAPI("/api/v1/alerts", &data); err != nil {
		c.t.Fatalf("Prometheus /api/v1/alerts: %v", err)
	}
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == name {
			return true
		}
	}
	return false
}

// amHasAlert: Alertmanager holds the alert as active (its API leaves out
// resolved alerts).
func (c *e2eChain) amHasAlert(name string) bool {
	c.t.Helper()
	code, body, err := testkit.Do(c.client, "GET", c.am+"/api/v2/alerts?filter="+url.QueryEscape(`alertname="`+name+`"`), nil, "", "")
	if err != nil || code != 200 {
		c.t.Fatalf("Alertmanager /api/v2/alerts: HTTP %d %v: %s", code, err, body)
	}
	var alerts []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &alerts); err != nil {
		c.t.Fatalf("Alertmanager /api/v2/alerts: %v", err)
	}
	for _, a := range alerts {
		if a.Labels["alertname"] == name {
			return true
		}
	}
	return false
}

func writeE2EFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func randomPassword(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestMain removes the lavender binary testkit.Binary built.
func TestMain(m *testing.M) {
	// The end-to-end chains and the tools' checks wait on Prometheus's
	// rule clock and on other programs far more than they use the CPU.
	testkit.WaitBoundParallel(8)
	code := m.Run()
	testkit.RemoveBinaries()
	os.Exit(code)
}
