package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/proctree"
)

// startPhaseServeOn is startPhaseServe on a fake procfs the test prepared.
func startPhaseServeOn(t *testing.T, clock *testkit.Clock, host *testkit.Procfs, args ...string) *watchdogRig {
	t.Helper()
	r := startServeOpts(t, host, serveOpts{clock: clock.Now},
		append([]string{"--watchdog.interval=20ms", "--watchdog.repeat=1h"}, args...)...)
	return &watchdogRig{serveRig: r, host: host}
}

// phaseNamed is one phase of GET /api/v1/phases.
func (r *watchdogRig) phaseNamed(name string) phaseapi.Phase {
	r.t.Helper()
	code, body := testkit.MustDo(r.t, nil, "GET", r.base+phaseapi.PhasesPath, nil, "", "")
	var resp phaseapi.PhasesResponse
	if err := json.Unmarshal([]byte(body), &resp); code != 200 || err != nil {
		r.t.Fatalf("GET phases: %d %s: %v", code, body, err)
	}
	for _, p := range resp.Phases {
		if p.Name == name {
			return p
		}
	}
	r.t.Fatalf("no phase %q in %s", name, body)
	return phaseapi.Phase{}
}

// TestServePhaseDiedWithoutEnding: a phase whose process dies without an
// end (SIGKILL, a segfault) pushes within a poll that it died, and ends
// failed, instead of a stall push ten minutes later. The pid is a real one:
// a child started, killed and reaped. A pid from another host (another boot
// id) is never judged, however dead it looks here.
func TestServePhaseDiedWithoutEnding(t *testing.T) {
	t.Parallel()
	// The child starts before the test's clock does: serve compares the
	// process's real start with the phase's start on that clock, and a
	// child started seconds later (a loaded machine starting serve) would
	// look like a reused pid.
	child := exec.Command("sleep", "600")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	clock := newFakeClock()
	host := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.26)})
	host.LinkRealHost()
	r := startPhaseServeOn(t, clock, host)
	here, err := proctree.ReadHost("")
	if err != nil {
		t.Fatal(err)
	}

	host.LinkProcess(pid)
	r.beat("Finetune", fmt.Sprintf(`"event":"start","pid":%d,"boot_id":%q,"pid_ns":%q`, pid, here.BootID, here.PIDNS))
	r.beat("Remote", fmt.Sprintf(`"event":"start","pid":%d,"boot_id":"another-host","pid_ns":%q`, pid, here.PIDNS))
	r.waitPolls(3)
	for _, d := range []time.Duration{6 * time.Minute, 6 * time.Minute} { // never 10m silent
		clock.Advance(d)
		r.beat("Finetune", `"event":"ping"`)
		r.beat("Remote", `"event":"ping"`)
	}
	r.wantPushes(nil, nil) // alive: nothing to say
	if p := r.phaseNamed("Finetune"); p.PIDStartTicks == 0 {
		t.Errorf("the living process's start time was not recorded: %+v", p.Process)
	}

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait() // reaped: the pid is gone
	r.waitPolls(2)   // seen gone once: the wrapper may be about to send the end
	clock.Advance(2 * time.Second)
	died := fmt.Sprintf(`[lavender-2] phase "Finetune" died without ending after 12m (pid %d gone)`, pid)
	r.wantPushes([]string{died}, []string{"BARK failed Finetune sent ok=1 fail=0"})

	p := r.phaseNamed("Finetune")
	if p.Status != phaseapi.StatusFailed || p.Reason != fmt.Sprintf("died without ending (pid %d gone)", pid) {
		t.Errorf("Finetune: %s %q, want failed with the reason", p.Status, p.Reason)
	}
	if p := r.phaseNamed("Remote"); p.Status != phaseapi.StatusActive {
		t.Errorf("Remote, a pid of another host: %s, want never judged (active)", p.Status)
	}
	if text := runlogtest.Text(t, r.logDir); !strings.Contains(text, " END   Finetune 722s died\n") {
		t.Errorf("run log lacks the END line of the death:\n%s", text)
	}
}

// TestServePhaseFailedEndsAreEvents: `phase start R; phase end R --failed;
// sleep 1; phase start R` pushes the failure although R runs again by the
// next poll; a failed end after an ok end pushes; an ok end after a failed
// one is refused with 409 and counted.
func TestServePhaseFailedEndsAreEvents(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := startPhaseServe(t, clock, "")
	var stdout, stderr testkit.SyncBuffer
	phase := func(args ...string) error {
		cli := parseCLI(t, append(append([]string{"phase"}, args...), "--url", r.base)...)
		g := testGlobals(&stdout, &stderr)
		switch args[0] {
		case "start":
			return cli.Phase.Start.Run(g)
		case "end":
			return cli.Phase.End.Run(g)
		}
		t.Fatalf("phase %s", args[0])
		return nil
	}
	for _, args := range [][]string{{"start", "R"}, {"end", "R", "--failed"}} {
		if err := phase(args...); err != nil {
			t.Fatalf("phase %s: %v", args, err)
		}
	}
	time.Sleep(time.Second)
	if err := phase("start", "R"); err != nil {
		t.Fatal(err)
	}
	rFailed := `[lavender-2] phase "R" failed after 0s`
	r.wantPushes([]string{rFailed}, []string{"BARK failed R sent ok=1 fail=0"})

	r.beat("Eval", `"event":"start"`)
	clock.Advance(time.Minute)
	r.beat("Eval", `"event":"end"`)
	r.beat("Eval", `"event":"end","status":"failed","reason":"rank 1: OSError: [Errno 28] No space left on device"`)
	evalFailed := `[lavender-2] phase "Eval" failed after 1m: rank 1: OSError: [Errno 28] No space left on device`
	r.wantPushes([]string{rFailed, evalFailed}, []string{"BARK failed R sent ok=1 fail=0", "BARK failed Eval sent ok=1 fail=0"})

	if err := phase("end", "Eval"); err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "never undoes a failure") {
		t.Errorf("ok end after a failed one: %v, want a 409 that says why", err)
	}
	if v := r.metric("lavender_heartbeats_refused_total", testkit.Labels{"reason": "ok_after_failed"}); v != 1 {
		t.Errorf("refused{reason=ok_after_failed} = %v, want 1", v)
	}
}

// phaseRun runs `lavender phase run NAME --url BASE -- CMD...` in process
// and returns its exit code.
func (r *watchdogRig) phaseRun(name string, command ...string) int {
	r.t.Helper()
	var stdout, stderr testkit.SyncBuffer
	cli := parseCLI(r.t, append([]string{"phase", "run", name, "--url", r.base, "--"}, command...)...)
	code, err := cli.Phase.Run.run(context.Background(), testGlobals(&stdout, &stderr), strings.NewReader(""), nil)
	if err != nil {
		r.t.Fatalf("phase run %s: %v", name, err)
	}
	return code
}

// TestServePhaseRunPushesTheCause: `lavender phase run` over real commands
// pushes why they failed: a Python traceback's last line, and a client
// inside the command that reports into the wrapper's phase (progress, its
// own reason) instead of making another, with one push.
func TestServePhaseRunPushesTheCause(t *testing.T) {
	t.Parallel()
	python := python3(t) // stands in for a training script
	clock := newFakeClock()
	r := startPhaseServe(t, clock, "")
	if code := r.phaseRun("Finetune", python, "-c", "raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')"); code != 1 {
		t.Fatalf("exit %d", code)
	}
	oom := `[lavender-2] phase "Finetune" failed after 0s: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB`
	r.wantPushes([]string{oom}, []string{"BARK failed Finetune sent ok=1 fail=0"})

	inner := `
import json, os, sys, urllib.request as u
def post(b):
    u.urlopen(u.Request(os.environ["LAVENDER_URL"] + "/api/v1/heartbeat", json.dumps(b).encode(), {"Content-Type": "application/json"}))
phase = os.environ["LAVENDER_PHASE"]
post({"phase": phase, "event": "ping", "step": 7, "total": 10})
post({"phase": phase, "event": "end", "status": "failed", "reason": "ValueError: loss is NaN at step 7"})
sys.exit(0)  # the framework swallowed it
`
	if code := r.phaseRun("Inner", python, "-c", inner); code != 0 {
		t.Fatalf("exit %d", code)
	}
	r.wantPushes([]string{oom, `[lavender-2] phase "Inner" failed after 0s: ValueError: loss is NaN at step 7`},
		[]string{"BARK failed Finetune sent ok=1 fail=0", "BARK failed Inner sent ok=1 fail=0"})
	p := r.phaseNamed("Inner")
	if p.Step == nil || *p.Step != 7 || p.Total != 10 || p.Status != phaseapi.StatusFailed {
		t.Errorf("Inner: step %v/%d %s; want the inner client's progress and failure", p.Step, p.Total, p.Status)
	}
	if text := runlogtest.Text(t, r.logDir); strings.Count(text, "START Inner") != 1 || !strings.Contains(text, "END   Inner 0s failed: ValueError\n") {
		t.Errorf("run log:\n%s\nwant one START Inner and its failed END", text)
	}
}

// TestServeOOMSaysWhoseProcess: an OOM push names the phase whose process,
// or a descendant of it, the kernel killed, even one that was reaped
// before the kill was read; or says the victim was no phase's process.
// Real processes: the phase's shell, its background children, and a
// process of the test's own.
func TestServeOOMSaysWhoseProcess(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	host := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.26)})
	host.LinkRealHost()
	kmsg := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(kmsg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := startPhaseServeOn(t, clock, host, "--path.kmsg="+kmsg)
	here, err := proctree.ReadHost("")
	if err != nil {
		t.Fatal(err)
	}
	start := func(args ...string) (*exec.Cmd, *bufio.Reader) {
		t.Helper()
		c := exec.Command(args[0], args[1:]...)
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		host.LinkProcess(c.Process.Pid)
		return c, bufio.NewReader(out)
	}
	// The phase's process, with a worker that the kernel will kill.
	shell, out := start("sh", "-c", "sleep 600 & sleep 601 & echo $!; wait")
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var worker int
	fmt.Sscan(line, &worker)
	host.LinkProcess(worker)
	r.beat("S2c", fmt.Sprintf(`"event":"start","pid":%d,"boot_id":%q,"pid_ns":%q`, shell.Process.Pid, here.BootID, here.PIDNS))
	r.waitPolls(3) // the phase's process tree is seen

	// The worker is killed and reaped before lavender reads the kill.
	if err := syscall.Kill(worker, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", worker))
		return os.IsNotExist(err)
	}, "the worker reaped")
	kill := func(seq, pid int, name string, kills uint64) {
		t.Helper()
		f, err := os.OpenFile(kmsg, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "3,%d,%d,-;Out of memory: Killed process %d (%s) total-vm:9000000kB, anon-rss:8000000kB\n", seq, seq*100, pid, name)
		f.Close()
		r.host.SetOOMKills(kills)
	}
	kill(30, worker, "sleep", 1)
	ofPhase := fmt.Sprintf(`[lavender-2] OOM killer struck sleep (pid %d) of phase "S2c" — swap 26%% full (0.5/2.0 GB)`, worker)
	r.wantPushes([]string{ofPhase}, []string{"BARK oom 1 kill sent ok=1 fail=0"})

	// A process of someone else's: the test's own child, not the phase's.
	other, _ := start("sleep", "600")
	kill(31, other.Process.Pid, "sleep", 2)
	notPhase := fmt.Sprintf(`[lavender-2] OOM killer struck sleep (pid %d), not a phase's process — swap 26%% full (0.5/2.0 GB)`, other.Process.Pid)
	r.wantPushes([]string{ofPhase, notPhase}, []string{"BARK oom 1 kill sent ok=1 fail=0", "BARK oom 1 kill sent ok=1 fail=0"})
}

// TestServeBarkLevels: --bark.level makes the named events louder; every
// other push stays passive; an unknown event or level is a start-up error
// that names the known ones.
func TestServeBarkLevels(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := startPhaseServe(t, clock, "", "--bark.level=failed=timeSensitive,stalled=active", "--bark.level=oom=critical")
	r.beat("Train", `"event":"start"`)
	r.beat("Train", `"event":"end","status":"failed","reason":"RuntimeError: boom"`)
	r.bark.WaitPushes(t, 1)
	r.host.SetSwap(testkit.SwapAt(swap2GiBinKB, 0.60))
	r.bark.WaitPushes(t, 2)
	var got []string
	for _, p := range r.bark.Pushes() {
		got = append(got, p.Level+" "+p.Body)
	}
	want := []string{
		`timeSensitive [lavender-2] phase "Train" failed after 0s: RuntimeError: boom`,
		"passive [lavender-2] swap 60% full (1.2/2.0 GB) — consider intervening",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("pushes\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, tc := range []struct{ flag, want string }{
		{"--bark.level=crashed=critical", `--bark.level: unknown event "crashed"; the events are swap, pressure, oom, failed, stalled, done, loss, gpu, gpu-lost, gpu-ecc, gpu-remap, gpu-hang, gpu-idle, gpu-slowdown, disk, disk-space`},
		{"--bark.level=failed=loud", `--bark.level: unknown level "loud" for failed; the levels are passive, active, timeSensitive, critical`},
		{"--bark.level=failed", `--bark.level: "failed" is not EVENT=LEVEL`},
	} {
		cli := parseCLI(t, "serve", tc.flag)
		if _, err := cli.Serve.options(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.flag, err, tc.want)
		}
	}
}
