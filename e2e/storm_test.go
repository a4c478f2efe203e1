package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// stormArgs are the flags of a bridge or serve whose phone gets 2 pushes a
// minute.
func stormArgs(t *testing.T, cmd string, bark *barktest.Server, logDir string, listen string) []string {
	barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.Template(barktest.Key) + "\n"})
	args := []string{cmd, "--web.listen-address=" + listen, "--runlog.dir=" + logDir, "--bark.config-dir=" + barkDir,
		"--bark.max-per-minute=2", "--bark.timeout=5s"}
	if cmd == "serve" {
		args = append(args, "--path.procfs="+testkit.SwapProcfs(t, 0.10), "--watchdog.interval=0")
	}
	return args
}

// TestStopSendsHeldAlerts: alerts held by storm control when the process
// is stopped inside the minute go out before it exits, in one summary, with
// their BARK line (before serve's RUN stop). Alertmanager was answered 200
// for them and will not send them again for hours.
func TestStopSendsHeldAlerts(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	for _, cmd := range []string{"bridge", "serve"} {
		t.Run(cmd, func(t *testing.T) {
			bark := barktest.New(t)
			logDir := filepath.Join(t.TempDir(), "logs")
			proc := testkit.StartCommand(t, stormArgs(t, cmd, bark, logDir, "127.0.0.1:0")...)
			base := proc.URL(t)
			testkit.WaitReady(t, nil, base, "", "")
			testkit.PostSwapStorm(t, base, 5)
			if n := bark.Count(); n != 2 {
				t.Fatalf("%d pushes before the stop, want 2", n)
			}
			if err := proc.Stop(); err != nil {
				t.Fatal(err)
			}
			got := bark.Pushes()
			if len(got) != 3 {
				t.Fatalf("%d pushes after the stop, want the 2 and a summary of the 3 held", len(got))
			}
			if want := "[lavender-2] 3 more alerts in the last minute: SwapUsageHigh ×3"; got[2].Body != want {
				t.Errorf("summary %q, want %q", got[2].Body, want)
			}
			entries := runlogtest.Entries(t, logDir)
			last := entries[len(entries)-1]
			if cmd == "serve" {
				last = entries[len(entries)-2]
				if entries[len(entries)-1] != "RUN stop" {
					t.Errorf("run log ends %q, want RUN stop", entries[len(entries)-1])
				}
			}
			if last != "BARK 3 more alerts sent ok=1 fail=0" {
				t.Errorf("run log %q, want the summary's BARK line", entries)
			}
		})
	}
}

// TestKill9KeepsHeldAlertsAndDedup: a bridge killed with SIGKILL while it
// holds alerts sends their summary after its restart, once the minute of
// the pushes before the kill is over; and Alertmanager's resend of every
// alert after the restart pushes none again. It waits out a real minute
// (the binary runs on the wall clock), so it is a slow test, and runs
// beside TestLoad rather than after it.
func TestKill9KeepsHeldAlertsAndDedup(t *testing.T) {
	needSlow(t)
	t.Parallel()
	bark := barktest.New(t)
	logDir := filepath.Join(t.TempDir(), "logs")
	addr := testkit.FreeAddrs(t, 1)[0] // the restart comes back on the same port
	base := "http://" + addr
	args := stormArgs(t, "bridge", bark, logDir, addr)
	first := testkit.StartCommandWith(t, testkit.Options{KillAtEnd: true}, args...)
	testkit.WaitReady(t, nil, base, "", "")
	began := time.Now()
	testkit.PostSwapStorm(t, base, 5)
	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	if n := bark.Count(); n != 2 {
		t.Fatalf("%d pushes before the restart, want 2", n)
	}

	second := testkit.StartCommand(t, args...)
	testkit.WaitReady(t, nil, base, "", "")
	// Its stderr is read by another goroutine: the line written before
	// ready may reach the buffer a moment after ready is answered.
	testkit.WaitFor(t, 10*time.Second, func() bool { return strings.Contains(second.Stderr.String(), "held=3") },
		"the restart to say it restored 3 held alerts")
	// Alertmanager sends the group again (a new alert joined it, or its
	// repeat_interval passed): every alert is a duplicate now.
	for i := range 5 {
		code, answer := testkit.MustDo(t, nil, "POST", base+"/webhook", testkit.SwapAlertWebhook(i), "", "")
		if code != 200 || !strings.Contains(answer, "duplicate=1") {
			t.Errorf("alert %d after the restart: %d %q, want a duplicate", i, code, answer)
		}
	}
	// The window of the first two pushes closes a minute after them.
	testkit.WaitFor(t, time.Until(began.Add(90*time.Second)), func() bool { return bark.Count() >= 3 }, "the summary after the restart")
	got := bark.Pushes()
	if len(got) != 3 {
		t.Fatalf("%d pushes, want 2 before the kill and 1 summary", len(got))
	}
	if want := "[lavender-2] 3 more alerts held across a restart: SwapUsageHigh ×3"; got[2].Body != want {
		t.Errorf("summary %q, want %q", got[2].Body, want)
	}
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := bark.Count(); n != 3 {
		t.Errorf("%d pushes after the stop, want 3: nothing was held any more", n)
	}
	log := runlogtest.Text(t, logDir)
	if strings.Count(log, "BARK 3 more alerts sent ok=1 fail=0") != 1 || strings.Count(log, "BARK swap 54% sent ok=1") != 2 {
		t.Errorf("run log:\n%s", log)
	}
}

// TestDamagedBarkStateNeverStopsAStart: a Bark state file that is not
// JSON, or not a regular file, is moved aside with a WARN, and the bridge
// serves.
func TestDamagedBarkStateNeverStopsAStart(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	for name, make := range map[string]func(path string) error{
		"not JSON": func(path string) error { return os.WriteFile(path, []byte("{\"version\":1,"), 0o644) },
		"a FIFO":   func(path string) error { return syscall.Mkfifo(path, 0o644) },
	} {
		t.Run(name, func(t *testing.T) {
			bark := barktest.New(t)
			logDir := t.TempDir()
			path := filepath.Join(logDir, "bark-state.json")
			if err := make(path); err != nil {
				t.Fatal(err)
			}
			proc := testkit.StartCommand(t, stormArgs(t, "bridge", bark, logDir, "127.0.0.1:0")...)
			base := proc.URL(t)
			testkit.WaitReady(t, nil, base, "", "")
			testkit.PostSwapStorm(t, base, 3)
			if _, err := os.Lstat(path + ".damaged"); err != nil {
				t.Errorf("damaged state not moved aside: %v", err)
			}
			if !proc.Logged("level=WARN", "bark-state.json.damaged") {
				t.Errorf("no WARN naming the moved file:\n%s", proc.Stderr)
			}
			if err := proc.Stop(); err != nil {
				t.Fatal(err)
			}
			// The stop saved a new state in its place: the dedup memory
			// of the three alerts.
			if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
				t.Fatalf("no state saved at the stop: %v", err)
			}
			data, err := os.ReadFile(path)
			if err != nil || strings.Count(string(data), `"incident"`) != 3 {
				t.Errorf("state after the stop: %v\n%s", err, data)
			}
		})
	}
}

// TestServeStopsWhileStatfsHangs runs the real binary watching paths on a
// FUSE mount whose server never answers (a dead NFS or FUSE mount): their
// calls wait in the kernel, deaf to SIGTERM. serve still reports them
// unreadable, and one SIGTERM ends it with status 0 after it sent the
// alerts storm control held. A statfs on the thread the kernel hands the
// process's signals to would keep SIGTERM from ever arriving.
func TestServeStopsWhileStatfsHangs(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	stalled := testkit.MountStalledFuse(t)
	bark := barktest.New(t)
	logDir := filepath.Join(t.TempDir(), "logs")
	args := stormArgs(t, "serve", bark, logDir, "127.0.0.1:0")
	// Several hung paths: each call holds its own thread in the kernel.
	args = append(args, "--watchdog.shm=", "--watchdog.disk="+stalled)
	for i := range 4 {
		args = append(args, fmt.Sprintf("--watchdog.disk=%s/run-%d", stalled, i))
	}
	serve := testkit.StartCommand(t, args...)
	base := serve.URL(t)
	testkit.WaitReady(t, nil, base, "", "")
	testkit.WaitFor(t, 20*time.Second, func() bool {
		v, err := testkit.Scrape(t, nil, base+"/metrics").Value("lavender_disk_error", testkit.Labels{"path": stalled})
		return err == nil && v == 1
	}, stalled+" reported unreadable")
	testkit.PostSwapStorm(t, base, 5)
	// The promise: out within --bark.timeout (5s, stormArgs's) and 2 s.
	start := time.Now()
	if err := serve.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := serve.Wait(5*time.Second + 2*time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	t.Logf("serve exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	got := bark.Pushes()
	if len(got) != 3 || got[2].Body != "[lavender-2] 3 more alerts in the last minute: SwapUsageHigh ×3" {
		t.Errorf("pushes %+v, want the 2 sent and the summary of the 3 held", got)
	}
	if !strings.Contains(serve.Stderr.String(), "statfs did not answer") {
		t.Errorf("the log does not say the statfs hung:\n%s", serve.Stderr)
	}
}
