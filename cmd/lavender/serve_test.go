package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lavender/runlog"
)

// fakeProcfs is a procfs with just meminfo and vmstat, rewritten atomically
// so the watchdog never reads half a file.
type fakeProcfs struct {
	t   *testing.T
	dir string
}

func newFakeProcfs(t *testing.T) *fakeProcfs {
	p := &fakeProcfs{t: t, dir: t.TempDir()}
	p.write("vmstat", "pswpin 100\npswpout 200\n")
	return p
}

func (p *fakeProcfs) write(name, content string) {
	p.t.Helper()
	tmp := filepath.Join(p.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, name)); err != nil {
		p.t.Fatal(err)
	}
}

// setSwap makes swap usedRatio full out of totalKB (0: no swap at all).
func (p *fakeProcfs) setSwap(totalKB uint64, usedRatio float64) {
	free := totalKB - uint64(float64(totalKB)*usedRatio)
	p.write("meminfo", fmt.Sprintf("MemTotal:       65536000 kB\nMemFree:         1234567 kB\nMemAvailable:    9830400 kB\n"+
		"SwapCached:      1048576 kB\nSwapTotal:      %8d kB\nSwapFree:       %8d kB\n", totalKB, free))
}

const swap32GiBinKB = 32 << 20

// fakeProcfsAt is a fake procfs with 32 GiB of swap, usedRatio full.
func fakeProcfsAt(t *testing.T, usedRatio float64) string {
	p := newFakeProcfs(t)
	p.setSwap(swap32GiBinKB, usedRatio)
	return p.dir
}

type serveRig struct {
	t      *testing.T
	base   string
	logs   *lockedBuffer
	bark   *fakeBark
	procfs *fakeProcfs
	logDir string
	stop   func() error
}

// startServe runs `lavender serve` in-process on 127.0.0.1:0 with a fake
// procfs (set before the call) and one Bark target, and waits until ready.
func startServe(t *testing.T, procfs *fakeProcfs, args ...string) *serveRig {
	t.Helper()
	bark := newFakeBark(t)
	r := startServeWith(t, procfs.dir, bark.URL+"/KEY/$0", args...)
	r.bark, r.procfs = bark, procfs
	return r
}

// startServeWith is startServe on any procfs dir and Bark URL template.
func startServeWith(t *testing.T, procfsDir, barkTemplate string, args ...string) *serveRig {
	t.Helper()
	return startServeOpts(t, serveOpts{procfsDir: procfsDir, barkTemplate: barkTemplate}, args...)
}

// serveOpts are startServeOpts' settings beyond the flags.
type serveOpts struct {
	procfsDir, barkTemplate string
	logDir                  string           // "": a new temporary dir
	clock                   func() time.Time // nil: time.Now
}

// startServeOpts is startServeWith with a run-log dir to resume and a
// clock of the test's.
func startServeOpts(t *testing.T, o serveOpts, args ...string) *serveRig {
	t.Helper()
	if o.logDir == "" {
		o.logDir = t.TempDir()
	}
	r := &serveRig{t: t, logs: &lockedBuffer{}, logDir: o.logDir}
	barkDir := barkConfigDir(t, map[string]string{"phone.bark.env": o.barkTemplate + "\n"})
	cli := parseCLI(t, append([]string{"serve", "--web.listen-address=127.0.0.1:0",
		"--path.procfs=" + o.procfsDir, "--runlog.dir=" + r.logDir, "--bark.config-dir=" + barkDir}, args...)...)
	g := &Globals{Logger: slog.New(slog.NewTextHandler(r.logs, nil)), Stdout: io.Discard, Stderr: r.logs, Clock: o.clock}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan []net.Addr, 1)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- cli.Serve.serve(ctx, g, func(a []net.Addr) { addrs <- a }, func() { close(ready) })
	}()
	select {
	case a := <-addrs:
		r.base = "http://" + a[0].String()
	case err := <-done:
		t.Fatalf("serve stopped before listening: %v\n%s", err, r.logs.String())
	}
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve stopped before ready: %v\n%s", err, r.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve not ready within 30s")
	}
	stopped := false
	r.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("serve did not stop within 30s")
		}
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return r
}

// metric returns the value of the first sample of name on /metrics.
func (r *serveRig) metric(name string) float64 {
	r.t.Helper()
	code, body := httpDo(r.t, "GET", r.base+"/metrics", nil)
	if code != 200 {
		r.t.Fatalf("/metrics answered %d", code)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{[^}]*\})? (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		r.t.Fatalf("/metrics has no %s", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		r.t.Fatal(err)
	}
	return v
}

// waitPolls waits until the watchdog has polled n more times.
func (r *serveRig) waitPolls(n int) {
	r.t.Helper()
	target := r.metric("lavender_watchdog_polls_total") + float64(n)
	waitFor(r.t, fmt.Sprintf("%d more watchdog polls", n), func() bool {
		return r.metric("lavender_watchdog_polls_total") >= target
	})
}

// pushes returns the messages Bark received, decoded from the request path.
func (r *serveRig) pushes() []string {
	r.t.Helper()
	var msgs []string
	for _, uri := range r.bark.requests() {
		path, _, _ := strings.Cut(uri, "?")
		msg, err := url.PathUnescape(strings.TrimPrefix(path, "/KEY/"))
		if err != nil {
			r.t.Fatalf("bad escape in %q: %v", uri, err)
		}
		msgs = append(msgs, msg)
	}
	return msgs
}

func (r *serveRig) runLog() string {
	r.t.Helper()
	path, err := runlog.CurrentPath(r.logDir)
	if err != nil {
		r.t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(data)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after 20s waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServeWatchdogPushes(t *testing.T) {
	procfs := newFakeProcfs(t)
	procfs.setSwap(swap32GiBinKB, 0.20)
	r := startServe(t, procfs, "--watchdog.interval=20ms", "--watchdog.repeat=1h", "--run.header=device=cuda lavender_2=v0.2.3")

	r.waitPolls(3)
	if got := r.pushes(); len(got) != 0 {
		t.Fatalf("pushes at 20%%: %q", got)
	}

	procfs.setSwap(swap32GiBinKB, 0.54)
	waitFor(t, "the first push", func() bool { return len(r.bark.requests()) >= 1 })
	const want54 = "[lavender-2] swap 54% full (17.3/32.0 GB) — consider intervening"
	if got := r.pushes(); len(got) != 1 || got[0] != want54 {
		t.Fatalf("pushes %q, want exactly %q", got, want54)
	}
	if uri := r.bark.requests()[0]; !strings.Contains(uri, "?level=passive&isArchive=0&") {
		t.Errorf("push %q is not silent", uri)
	}

	r.waitPolls(10) // stays high: no reminder within an hour
	if got := r.pushes(); len(got) != 1 {
		t.Fatalf("%d pushes while swap stayed high, want 1: %q", len(got), got)
	}

	procfs.setSwap(swap32GiBinKB, 0.20) // falls: resolved, and re-armed
	waitFor(t, "the resolution", func() bool { return len(r.bark.requests()) >= 2 })
	procfs.setSwap(swap32GiBinKB, 0.60)
	waitFor(t, "the second push", func() bool { return len(r.bark.requests()) >= 3 })
	r.waitPolls(3)
	got := r.pushes()
	if len(got) != 3 || !strings.HasPrefix(got[1], "[lavender-2] resolved: swap 20% full (6.4/32.0 GB) after ") ||
		got[2] != "[lavender-2] swap 60% full (19.2/32.0 GB) — consider intervening" {
		t.Fatalf("pushes %q, want the resolution, then a new one at 60%%", got)
	}
	// The resolution replaces the first push on the phone; the next
	// incident is a notification of its own.
	var ids []string
	for _, uri := range r.bark.requests() {
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.Query().Get("id"))
	}
	if ids[0] == "" || ids[1] != ids[0] || ids[2] == ids[0] {
		t.Errorf("ids %q: want the resolution's equal to the first push's, the next incident's different", ids)
	}

	log := r.runLog()
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
	if log := r.runLog(); !strings.HasSuffix(log, " RUN stop\n") {
		t.Errorf("run log does not end with RUN stop:\n%s", log)
	}
}

func TestServeWatchdogReminder(t *testing.T) {
	procfs := newFakeProcfs(t)
	procfs.setSwap(swap32GiBinKB, 0.54) // already paging at start
	r := startServe(t, procfs, "--watchdog.interval=20ms", "--watchdog.repeat=300ms")
	// The first poll runs before ready: the push is there already.
	if got := r.pushes(); len(got) != 1 {
		t.Fatalf("at ready: %d pushes, want 1 from the first poll", len(got))
	}
	waitFor(t, "a reminder", func() bool { return len(r.bark.requests()) >= 2 })
	if got := r.pushes(); got[1] != got[0] {
		t.Errorf("reminder %q differs from the first push %q", got[1], got[0])
	}
}

func TestServeNoSwapNeverPushes(t *testing.T) {
	procfs := newFakeProcfs(t)
	procfs.setSwap(0, 0)
	r := startServe(t, procfs, "--watchdog.interval=20ms", "--watchdog.repeat=20ms")
	r.waitPolls(10)
	if got := r.pushes(); len(got) != 0 {
		t.Errorf("pushes on a host without swap: %q", got)
	}
	if got := r.metric("lavender_swap_used_ratio"); got != 0 {
		t.Errorf("lavender_swap_used_ratio %v, want 0", got)
	}
}

func TestServeWatchdogOff(t *testing.T) {
	procfs := newFakeProcfs(t)
	procfs.setSwap(swap32GiBinKB, 0.90)
	r := startServe(t, procfs, "--watchdog.interval=0")
	// The exporter still reports swap; only the built-in push is off.
	if got := r.metric("lavender_swap_used_ratio"); got < 0.89 || got > 0.91 {
		t.Errorf("lavender_swap_used_ratio %v, want 0.9", got)
	}
	code, body := httpDo(t, "GET", r.base+"/metrics", nil)
	if code != 200 || strings.Contains(body, "lavender_watchdog_polls_total") {
		t.Errorf("watchdog metrics present with the watchdog off")
	}
	if got := r.pushes(); len(got) != 0 {
		t.Errorf("pushes with the watchdog off: %q", got)
	}
}

func TestServeOneListenerForEverything(t *testing.T) {
	procfs := newFakeProcfs(t)
	procfs.setSwap(swap32GiBinKB, 0.10)
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
		if code, body := httpDo(t, tc.method, r.base+tc.path, []byte(tc.body)); code != tc.want {
			t.Errorf("%s %s: %d, want %d: %s", tc.method, tc.path, code, tc.want, body)
		}
	}
	if log := r.runLog(); !strings.Contains(log, " START Pretrain 1/3\n") {
		t.Errorf("run log lacks the phase:\n%s", log)
	}
}

func TestServeResume(t *testing.T) {
	procfs := newFakeProcfs(t)
	procfs.setSwap(swap32GiBinKB, 0.10)
	first := startServe(t, procfs, "--watchdog.interval=0")
	httpDo(t, "POST", first.base+"/api/v1/heartbeat", []byte(`{"phase":"SFT","event":"start"}`))
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	path, _ := runlog.CurrentPath(first.logDir)

	cli := parseCLI(t, "serve", "--web.listen-address=127.0.0.1:0", "--path.procfs="+procfs.dir,
		"--runlog.dir="+first.logDir, "--watchdog.interval=0", "--run.resume", "--bark.config-dir="+t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var base string
	addrs := make(chan []net.Addr, 1)
	go func() {
		done <- cli.Serve.serve(ctx, &Globals{Logger: slog.New(slog.DiscardHandler), Stdout: io.Discard, Stderr: io.Discard},
			func(a []net.Addr) { addrs <- a }, nil)
	}()
	base = "http://" + (<-addrs)[0].String()
	waitFor(t, "ready", func() bool { code, _ := httpDo(t, "GET", base+"/-/ready", nil); return code == 200 })
	code, body := httpDo(t, "POST", base+"/api/v1/heartbeat", []byte(`{"phase":"SFT","event":"end"}`))
	cancel()
	if err := <-done; err != nil {
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

// TestServeSIGTERM runs the real binary: it has the --runtime.* defaults
// when the environment sets nothing, SIGTERM ends it with status 0, and
// the run log ends with RUN stop.
func TestServeSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "lavender")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	procfs := newFakeProcfs(t)
	procfs.setSwap(swap32GiBinKB, 0.10)
	logDir := t.TempDir()
	port := freePort(t)
	cmd := exec.Command(bin, "serve", "--web.listen-address=127.0.0.1:"+port, "--path.procfs="+procfs.dir,
		"--runlog.dir="+logDir, "--bark.config-dir="+t.TempDir(), "--watchdog.interval=50ms")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") && !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "LAVENDER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ready", func() bool {
		code, _ := httpDoQuiet("http://127.0.0.1:" + port + "/-/ready")
		return code == 200
	})
	code, body := httpDo(t, http.MethodGet, "http://127.0.0.1:"+port+"/metrics", nil)
	for _, want := range []string{"\ngo_sched_gomaxprocs_threads 1\n", "\ngo_gc_gogc_percent 75\n"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET /metrics: %d, want %q (the --runtime.* defaults)", code, strings.TrimSpace(want))
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("serve did not exit within 30s of SIGTERM")
	}
	path, err := runlog.CurrentPath(logDir)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(data), " RUN stop\n") {
		t.Errorf("run log does not end with RUN stop:\n%s", data)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// httpDoQuiet is a GET that reports a refused connection as code 0, for
// waiting on a process that is still starting.
func httpDoQuiet(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestServeMetricsPassPromtool runs promtool check metrics on a full scrape
// of serve after a push: the exporter's, the bridge's and the watchdog's
// metrics together, as Prometheus sees them.
func TestServeMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("LAVENDER_E2E") == "1" {
			t.Fatal("LAVENDER_E2E=1 but promtool is not installed")
		}
		t.Skip("promtool not installed")
	}
	procfs := newFakeProcfs(t)
	procfs.setSwap(swap32GiBinKB, 0.54)
	r := startServe(t, procfs, "--watchdog.interval=20ms")
	httpDo(t, "POST", r.base+"/api/v1/heartbeat", []byte(`{"phase":"Pretrain 1/3","event":"start"}`))
	code, scrape := httpDo(t, "GET", r.base+"/metrics", nil)
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
