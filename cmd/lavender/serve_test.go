package main

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/diskguard"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/ntfytest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

// serveRig is `lavender serve` run in-process on a fake procfs, pushing
// to a Bark stand-in: the watchdog tests read what it pushed and change the
// host under it.
type serveRig struct {
	*inProcess
	t      *testing.T
	bark   *barktest.Server
	ntfy   *ntfytest.Server // nil unless serveOpts.ntfy
	procfs *testkit.Procfs
	logDir string
}

// startServe runs serve on procfs with one Bark target and returns once
// it is ready (its first poll done).
func startServe(t *testing.T, procfs *testkit.Procfs, args ...string) *serveRig {
	t.Helper()
	return startServeOpts(t, procfs, serveOpts{}, args...)
}

// serveOpts are startServeOpts' settings beyond the flags.
type serveOpts struct {
	logDir string           // "": a new temporary dir
	clock  func() time.Time // nil: time.Now
	statfs diskguard.StatFunc
	ntfy   bool // an ntfy target too, beside the Bark one
}

// startServeOpts is startServe with a run-log dir to resume and a clock of
// the test's.
func startServeOpts(t *testing.T, procfs *testkit.Procfs, o serveOpts, args ...string) *serveRig {
	t.Helper()
	if o.logDir == "" {
		o.logDir = t.TempDir()
	}
	r := &serveRig{t: t, bark: barktest.New(t), procfs: procfs, logDir: o.logDir}
	targets := map[string]string{"phone.bark.env": r.bark.Template(barktest.Key) + "\n"}
	if o.ntfy {
		r.ntfy = ntfytest.New(t)
		targets["phone.ntfy.env"] = r.ntfy.TopicURL(ntfytest.Topic) + "\n"
	}
	barkDir := barktest.ConfigDir(t, targets)
	r.inProcess = startInProcessWith(t, Globals{Clock: o.clock, Statfs: o.statfs}, append([]string{"serve", "--path.procfs=" + procfs.Dir,
		"--runlog.dir=" + r.logDir, "--bark.config-dir=" + barkDir}, args...)...)
	return r
}

// metric is the value of the one series of name with labels on /metrics.
func (r *serveRig) metric(name string, labels testkit.Labels) float64 {
	r.t.Helper()
	return testkit.Scrape(r.t, r.client, r.base+"/metrics").MustValue(r.t, name, labels)
}

// waitPolls waits until the watchdog has polled n more times.
func (r *serveRig) waitPolls(n int) {
	r.t.Helper()
	target := r.metric("lavender_watchdog_polls_total", nil) + float64(n)
	testkit.WaitFor(r.t, 20*time.Second, func() bool {
		return r.metric("lavender_watchdog_polls_total", nil) >= target
	}, fmt.Sprintf("%d more watchdog polls", n))
}

// pushes are the messages Bark received, in order.
func (r *serveRig) pushes() []string {
	var msgs []string
	for _, p := range r.bark.Pushes() {
		msgs = append(msgs, p.Body)
	}
	return msgs
}

// TestServePushesToNtfyToo: serve's watchdog pushes reach an ntfy target
// beside the Bark one, with the same words, silent (priority 2), tagged as
// a swap warning, and the resolution replaces the push (one sequence id).
func TestServePushesToNtfyToo(t *testing.T) {
	t.Parallel()
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.20)})
	r := startServeOpts(t, procfs, serveOpts{ntfy: true}, "--watchdog.interval=20ms", "--watchdog.repeat=1h")
	procfs.SetSwap(testkit.SwapAt(testkit.Swap32GiBinKB, 0.54))
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.bark.Count() >= 1 && r.ntfy.Count() >= 1 }, "the push on both channels")
	procfs.SetSwap(testkit.SwapAt(testkit.Swap32GiBinKB, 0.20))
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.bark.Count() >= 2 && r.ntfy.Count() >= 2 }, "the resolution on both channels")
	b, n := r.bark.Pushes(), r.ntfy.Publishes()
	for i := range 2 {
		if b[i].Body != n[i].Message {
			t.Errorf("push %d: Bark %q, ntfy %q", i, b[i].Body, n[i].Message)
		}
	}
	if n[0].Message != "[lavender-2] swap 54% full (17.3/32.0 GB) — consider intervening" || n[0].Priority != 2 ||
		len(n[0].Tags) != 2 || n[0].Tags[0] != "warning" || n[0].Tags[1] != "swap" {
		t.Errorf("ntfy got %q priority %d tags %q", n[0].Message, n[0].Priority, n[0].Tags)
	}
	if n[1].SequenceID == "" || n[1].SequenceID != n[0].SequenceID || n[1].Tags[0] != "white_check_mark" {
		t.Errorf("the resolution: sequence ids %q then %q, tags %q", n[0].SequenceID, n[1].SequenceID, n[1].Tags)
	}
	if log := runlogtest.Text(t, r.logDir); !strings.Contains(log, " BARK swap 54% sent ok=2 fail=0\n") {
		t.Errorf("run log, want the push counted on both channels:\n%s", log)
	}
}

func TestServeWatchdogPushes(t *testing.T) {
	t.Parallel()
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.20)})
	r := startServe(t, procfs, "--watchdog.interval=20ms", "--watchdog.repeat=1h", "--run.header=device=cuda lavender_2=v0.2.3")

	r.waitPolls(3)
	if got := r.pushes(); len(got) != 0 {
		t.Fatalf("pushes at 20%%: %q", got)
	}

	procfs.SetSwap(testkit.SwapAt(testkit.Swap32GiBinKB, 0.54))
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.bark.Count() >= 1 }, "the first push")
	const want54 = "[lavender-2] swap 54% full (17.3/32.0 GB) — consider intervening"
	if got := r.pushes(); len(got) != 1 || got[0] != want54 {
		t.Fatalf("pushes %q, want exactly %q", got, want54)
	}
	if uri := r.bark.Pushes()[0].RequestURI; !strings.Contains(uri, "?level=passive&isArchive=0&") {
		t.Errorf("push %q is not silent", uri)
	}

	r.waitPolls(10) // stays high: no reminder within an hour
	if got := r.pushes(); len(got) != 1 {
		t.Fatalf("%d pushes while swap stayed high, want 1: %q", len(got), got)
	}

	procfs.SetSwap(testkit.SwapAt(testkit.Swap32GiBinKB, 0.20)) // falls: resolved, and re-armed
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.bark.Count() >= 2 }, "the resolution")
	procfs.SetSwap(testkit.SwapAt(testkit.Swap32GiBinKB, 0.60))
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.bark.Count() >= 3 }, "the second push")
	r.waitPolls(3)
	got := r.pushes()
	if len(got) != 3 || !strings.HasPrefix(got[1], "[lavender-2] resolved: swap 20% full (6.4/32.0 GB) after ") ||
		got[2] != "[lavender-2] swap 60% full (19.2/32.0 GB) — consider intervening" {
		t.Fatalf("pushes %q, want the resolution, then a new one at 60%%", got)
	}
	// The resolution replaces the first push on the phone; the next
	// incident is a notification of its own.
	var ids []string
	for _, p := range r.bark.Pushes() {
		u, err := url.Parse(p.RequestURI)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.Query().Get("id"))
	}
	if ids[0] == "" || ids[1] != ids[0] || ids[2] == ids[0] {
		t.Errorf("ids %q: want the resolution's equal to the first push's, the next incident's different", ids)
	}

	log := runlogtest.Text(t, r.logDir)
	for _, want := range []string{
		"# device=cuda lavender_2=v0.2.3\n",
		" RUN start  device=",
		" BARK swap 54% sent ok=1 fail=0\n",
		" BARK resolved swap 20% sent ok=1 fail=0\n",
		" BARK swap 60% sent ok=1 fail=0\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("run log lacks %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, " BARK "); n != 3 {
		t.Errorf("%d BARK lines, want one per push:\n%s", n, log)
	}

	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if log := runlogtest.Text(t, r.logDir); !strings.HasSuffix(log, " RUN stop\n") {
		t.Errorf("run log does not end with RUN stop:\n%s", log)
	}
}

func TestServeWatchdogReminder(t *testing.T) {
	t.Parallel()
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.54)}) // already paging at start
	r := startServe(t, procfs, "--watchdog.interval=20ms", "--watchdog.repeat=300ms")
	// The first poll runs before ready: the push is there already.
	if got := r.pushes(); len(got) != 1 {
		t.Fatalf("at ready: %d pushes, want 1 from the first poll", len(got))
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.bark.Count() >= 2 }, "a reminder")
	if got := r.pushes(); got[1] != got[0] {
		t.Errorf("reminder %q differs from the first push %q", got[1], got[0])
	}
}

func TestServeNoSwapNeverPushes(t *testing.T) {
	t.Parallel()
	procfs := testkit.NewProcfs(t, testkit.Host{}) // no swap at all
	r := startServe(t, procfs, "--watchdog.interval=20ms", "--watchdog.repeat=20ms")
	r.waitPolls(10)
	if got := r.pushes(); len(got) != 0 {
		t.Errorf("pushes on a host without swap: %q", got)
	}
	if got := r.metric("lavender_swap_used_ratio", nil); got != 0 {
		t.Errorf("lavender_swap_used_ratio %v, want 0", got)
	}
}

func TestServeWatchdogOff(t *testing.T) {
	t.Parallel()
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.90)})
	r := startServe(t, procfs, "--watchdog.interval=0")
	// The exporter still reports swap; only the built-in push is off.
	if got := r.metric("lavender_swap_used_ratio", nil); got < 0.89 || got > 0.91 {
		t.Errorf("lavender_swap_used_ratio %v, want 0.9", got)
	}
	code, body := testkit.MustDo(t, nil, "GET", r.base+"/metrics", nil, "", "")
	if code != 200 || strings.Contains(body, "lavender_watchdog_polls_total") {
		t.Errorf("watchdog metrics present with the watchdog off")
	}
	if got := r.pushes(); len(got) != 0 {
		t.Errorf("pushes with the watchdog off: %q", got)
	}
}

func TestServeOneListenerForEverything(t *testing.T) {
	t.Parallel()
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.10)})
	r := startServe(t, procfs, "--watchdog.interval=0")
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/-/healthy", "", 200},
		{"GET", "/-/ready", "", 200},
		{"GET", "/metrics", "", 200},
		{"GET", "/", "", 200},
		{"POST", "/api/v1/heartbeat", `{"phase":"Pretrain 1/3","event":"start"}`, 200},
		{"GET", "/api/v1/phases", "", 200},
		{"POST", "/webhook", `{"version":"4","status":"firing","alerts":[]}`, 200},
		{"POST", "/-/reload", "", 200},
	} {
		if code, body := testkit.MustDo(t, nil, tc.method, r.base+tc.path, []byte(tc.body), "", ""); code != tc.want {
			t.Errorf("%s %s: %d, want %d: %s", tc.method, tc.path, code, tc.want, body)
		}
	}
	if log := runlogtest.Text(t, r.logDir); !strings.Contains(log, " START Pretrain 1/3\n") {
		t.Errorf("run log lacks the phase:\n%s", log)
	}
}

func TestServeResume(t *testing.T) {
	t.Parallel()
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.10)})
	first := startServe(t, procfs, "--watchdog.interval=0")
	testkit.MustDo(t, nil, "POST", first.base+"/api/v1/heartbeat", []byte(`{"phase":"SFT","event":"start"}`), "", "")
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	path, _ := runlog.CurrentPath(first.logDir)

	second := startInProcess(t, nil, "serve", "--path.procfs="+procfs.Dir,
		"--runlog.dir="+first.logDir, "--watchdog.interval=0", "--run.resume", "--bark.config-dir="+t.TempDir())
	code, body := testkit.MustDo(t, nil, "POST", second.base+"/api/v1/heartbeat", []byte(`{"phase":"SFT","event":"end"}`), "", "")
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}
	if code != 200 {
		t.Fatalf("end after resume: %d %s", code, body)
	}
	if now, _ := runlog.CurrentPath(first.logDir); now != path {
		t.Errorf("--run.resume started a new run %s", now)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), " END   SFT ") || strings.Count(string(data), "RUN start") != 1 {
		t.Errorf("resumed log:\n%s", data)
	}
}

// TestServeMetricsPassPromtool runs promtool check metrics on a full scrape
// of serve after a push: the exporter's, the bridge's and the watchdog's
// metrics together, as Prometheus sees them.
func TestServeMetricsPassPromtool(t *testing.T) {
	t.Parallel()
	promtool := testkit.NeedTool(t, "prometheus", "promtool")
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.54)})
	r := startServe(t, procfs, "--watchdog.interval=20ms")
	testkit.MustDo(t, nil, "POST", r.base+"/api/v1/heartbeat", []byte(`{"phase":"Pretrain 1/3","event":"start"}`), "", "")
	code, scrape := testkit.MustDo(t, nil, "GET", r.base+"/metrics", nil, "", "")
	if code != 200 {
		t.Fatalf("scrape: %d", code)
	}
	for _, name := range []string{"lavender_swap_used_ratio", "lavender_phase_active", "lavender_bark_pushes_total",
		"lavender_webhook_requests_total", "lavender_watchdog_polls_total", "lavender_runlog_write_errors_total", "lavender_build_info"} {
		if !strings.Contains(scrape, name) {
			t.Errorf("scrape lacks %s", name)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape)
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
