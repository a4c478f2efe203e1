package phaseserver

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/runlog"
)

// fakeProcs is a procfs with a boot id, a pid namespace, a boot time and
// the stat files the test writes.
type fakeProcs struct {
	t   *testing.T
	dir string
}

const (
	fakeBootID = "6f1e0c7a-boot"
	fakePIDNS  = "pid:[4026531836]"
)

func newFakeProcs(t *testing.T, btime time.Time) *fakeProcs {
	f := &fakeProcs{t: t, dir: t.TempDir()}
	f.write("sys/kernel/random/boot_id", fakeBootID+"\n")
	f.write("stat", fmt.Sprintf("cpu  1 2 3 4\nbtime %d\nprocesses 100\n", btime.Unix()))
	if err := os.MkdirAll(filepath.Join(f.dir, "self", "ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fakePIDNS, filepath.Join(f.dir, "self", "ns", "pid")); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeProcs) write(name, content string) {
	f.t.Helper()
	path := filepath.Join(f.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// proc writes the stat of pid: its state and its start in ticks after boot.
func (f *fakeProcs) proc(pid int, state string, startTicks uint64) {
	f.t.Helper()
	f.write(fmt.Sprintf("%d/stat", pid), fmt.Sprintf("%d (python3 (train)) %s 1 %d 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 %d 100 10 18446744073709551615\n", pid, state, pid, startTicks))
}

func (f *fakeProcs) gone(pid int) {
	f.t.Helper()
	if err := os.RemoveAll(filepath.Join(f.dir, fmt.Sprint(pid))); err != nil {
		f.t.Fatal(err)
	}
}

// A process is judged dead when it is gone, a zombie, or its pid names a
// later process (reused), at two checks a second apart; only a pid of this
// boot and pid namespace is judged.
func TestCheckProcesses(t *testing.T) {
	clock := newFakeClock()
	btime := t0.Add(-time.Hour)
	procs := newFakeProcs(t, btime)
	e := New(Config{ProcFS: procs.dir, Runlog: runlog.Options{Dir: t.TempDir()}, Clock: clock.Now}, slog.New(slog.DiscardHandler))
	// Ticks of t0 - 1m: every process below started before its phase.
	before := uint64(59 * 60 * 100)
	start := func(name string, pid int64, bootID string) {
		t.Helper()
		if _, err := e.Apply(phaseapi.HeartbeatRequest{Phase: name, Event: phaseapi.EventStart, PID: &pid, BootID: bootID, PIDNS: fakePIDNS}); err != nil {
			t.Fatal(err)
		}
	}
	procs.proc(100, "S", before) // alive throughout
	procs.proc(200, "S", before) // gone later
	procs.proc(300, "S", before) // its pid is reused later
	procs.proc(400, "Z", before) // a zombie nobody reaps
	procs.proc(500, "S", before+2*3600*100)
	start("Alive", 100, fakeBootID)
	start("Gone", 200, fakeBootID)
	start("Reused", 300, fakeBootID)
	start("Zombie", 400, fakeBootID)
	start("Later", 500, fakeBootID)    // the pid named a process that started after the phase: reused before the first look
	start("Elsewhere", 600, "another") // no such pid here, but another boot: never judged
	e.CheckProcesses()
	procs.gone(200)
	procs.proc(300, "R", before+100*100)
	clock.Advance(500 * time.Millisecond)
	e.CheckProcesses()
	clock.Advance(500 * time.Millisecond)
	e.CheckProcesses()

	status := func() string {
		_, phases := e.Snapshot()
		var out []string
		for _, p := range phases {
			out = append(out, p.Name+" "+p.Status+" "+p.Reason)
		}
		return strings.Join(out, "\n")
	}
	want := strings.Join([]string{
		"Alive active ",
		"Gone failed died without ending (pid 200 gone)",
		"Reused failed died without ending (pid 300 gone)",
		"Zombie failed died without ending (pid 400 gone)",
		"Later failed died without ending (pid 500 gone)",
		"Elsewhere active ",
	}, "\n")
	// Gone and Reused were seen gone a second ago: not yet ended.
	if got := status(); got == want {
		t.Fatalf("phases ended at the first sight of a gone process")
	}
	clock.Advance(time.Second)
	e.CheckProcesses()
	if got := status(); got != want {
		t.Errorf("phases:\n%s\nwant\n%s", got, want)
	}
	var died []string
	for _, end := range e.Ends() {
		if end.Died {
			died = append(died, end.Phase)
		}
	}
	if got := strings.Join(died, ","); got != "Zombie,Later,Gone,Reused" {
		t.Errorf("died ends %s, want Zombie,Later (ended first), then Gone,Reused", got)
	}
	// An end that comes for a phase seen gone once wins: the wrapper's
	// reason, not a death.
	procs.proc(700, "S", before)
	start("Wrapped", 700, fakeBootID)
	e.CheckProcesses()
	procs.gone(700)
	e.CheckProcesses()
	if _, err := e.Apply(phaseapi.HeartbeatRequest{Phase: "Wrapped", Event: phaseapi.EventEnd, Status: phaseapi.StatusFailed, Reason: "killed by SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	e.CheckProcesses()
	if p, _ := findPhase(e, "Wrapped"); p.Reason != "killed by SIGKILL" {
		t.Errorf("Wrapped: reason %q, want the end's own", p.Reason)
	}
}

// A run whose steps overshoot the total it gave (two optimizer steps a
// batch, counted against the batches) ends as it says, ok or failed with its
// reason, and its process exiting afterwards changes nothing: the phase is
// not ended again as died, and no died end reaches the watchdog.
func TestOvershootingRunEndsAsItSaid(t *testing.T) {
	for _, tc := range []struct {
		name, status, reason string
	}{
		{"ok", phaseapi.StatusOK, ""},
		{"failed", phaseapi.StatusFailed, "RuntimeError: discriminator loss is NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			btime := t0.Add(-time.Hour)
			procs := newFakeProcs(t, btime)
			e := New(Config{ProcFS: procs.dir, Runlog: runlog.Options{Dir: t.TempDir()}, Clock: clock.Now}, slog.New(slog.DiscardHandler))
			procs.proc(4242, "S", 59*60*100)
			pid := int64(4242)
			if _, err := e.Apply(phaseapi.HeartbeatRequest{Phase: "GAN", Event: phaseapi.EventStart, PID: &pid, BootID: fakeBootID, PIDNS: fakePIDNS, Step: ptr(uint64(0)), Total: ptr(uint64(10))}); err != nil {
				t.Fatal(err)
			}
			e.CheckProcesses()
			for step := uint64(1); step <= 12; step++ {
				clock.Advance(30 * time.Second)
				if _, err := e.Apply(phaseapi.HeartbeatRequest{Phase: "GAN", Event: phaseapi.EventPing, Step: ptr(step)}); err != nil {
					t.Fatalf("ping step %d of 10: %v", step, err)
				}
			}
			if _, err := e.Apply(phaseapi.HeartbeatRequest{Phase: "GAN", Event: phaseapi.EventEnd, Status: tc.status, Reason: tc.reason, Step: ptr(uint64(12))}); err != nil {
				t.Fatalf("end: %v", err)
			}
			procs.gone(4242)
			for range 3 {
				clock.Advance(time.Second)
				e.CheckProcesses()
			}
			p, _ := findPhase(e, "GAN")
			if p.Status != tc.status || p.Reason != tc.reason || p.StepNow() != 12 {
				t.Errorf("phase %s %q at step %d, want %s %q at step 12", p.Status, p.Reason, p.StepNow(), tc.status, tc.reason)
			}
			ends := e.Ends()
			if len(ends) != 1 || ends[0].Status != tc.status || ends[0].Reason != tc.reason || ends[0].Died {
				t.Errorf("ends %+v, want the one %s end the run sent", ends, tc.status)
			}
		})
	}
}

func findPhase(e *Server, name string) (phaseapi.Phase, bool) {
	_, phases := e.Snapshot()
	for _, p := range phases {
		if p.Name == name {
			return p, true
		}
	}
	return phaseapi.Phase{}, false
}

// A start whose pid descends from the running phase's process (a script
// the wrapper runs, announcing itself) joins the phase instead of
// restarting it; a start from elsewhere restarts it. Real processes: this
// test's own and a child of it.
func TestStartFromInsideJoins(t *testing.T) {
	dir := t.TempDir()
	e := New(Config{Runlog: runlog.Options{Dir: dir}}, slog.New(slog.DiscardHandler))
	if !e.host.Known() {
		t.Skip("this host's /proc names no boot id or pid namespace")
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	start := func(pid int) phaseapi.Phase {
		t.Helper()
		p64 := int64(pid)
		p, err := e.Apply(phaseapi.HeartbeatRequest{Phase: "Train", Event: phaseapi.EventStart, PID: &p64, BootID: e.host.BootID, PIDNS: e.host.PIDNS, Step: ptr(uint64(5))})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := start(os.Getpid())
	joined := start(child.Process.Pid)
	if joined.Heartbeats != 2 || !joined.Started.Equal(first.Started) || joined.PID != int64(os.Getpid()) {
		t.Errorf("a start from a descendant: %d heartbeats, started %v (was %v), pid %d; want it joined", joined.Heartbeats, joined.Started, first.Started, joined.PID)
	}
	restarted := start(1) // init is no descendant of this test
	if restarted.Heartbeats != 1 || restarted.PID != 1 {
		t.Errorf("a start from elsewhere: %d heartbeats, pid %d; want a restart", restarted.Heartbeats, restarted.PID)
	}
	var starts int
	for _, l := range runlogtest.Entries(t, dir) {
		if l == "START Train" {
			starts++
		}
	}
	if starts != 2 {
		t.Errorf("%d START lines, want 2 (the join writes none)", starts)
	}
}

func ptr[T any](v T) *T { return &v }

// TestRestartGivesTheSavedEndsBack: a crash (no Close) after the server
// took ends: the restarted server holds an end for every ended phase of
// the saved table, in the order they ended and numbered anew, with the
// reason and the status their end had; the active phase gives none.
func TestRestartGivesTheSavedEndsBack(t *testing.T) {
	env := newTestEnv(t)
	if _, err := env.e.StartRun("", ""); err != nil {
		t.Fatal(err)
	}
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.beat("Eval", phaseapi.EventStart, "")
	env.beat("SFT", phaseapi.EventStart, "")
	env.clock.Advance(time.Minute)
	if _, err := env.e.Apply(phaseapi.HeartbeatRequest{Phase: "Eval", Event: phaseapi.EventEnd, Status: phaseapi.StatusFailed, Reason: "ValueError: bad batch"}); err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(time.Minute)
	env.beat("Pretrain", phaseapi.EventEnd, "")
	if got := len(env.e.Ends()); got != 2 {
		t.Fatalf("%d ends before the crash, want 2", got)
	}

	env.clock.Advance(time.Second)
	env.restart()
	ends := env.e.Ends()
	if len(ends) != 2 {
		t.Fatalf("ends after the restart: %+v, want Eval's and Pretrain's", ends)
	}
	eval, pretrain := ends[0], ends[1]
	if eval.Seq != 1 || eval.Phase != "Eval" || eval.Status != phaseapi.StatusFailed || eval.Reason != "ValueError: bad batch" ||
		!eval.Ended.Equal(t0.Add(time.Minute)) || eval.Died {
		t.Errorf("Eval's end after the restart: %+v", eval)
	}
	if pretrain.Seq != 2 || pretrain.Phase != "Pretrain" || pretrain.Status != phaseapi.StatusOK || !pretrain.Ended.Equal(t0.Add(2*time.Minute)) ||
		pretrain.Duration() != 2*time.Minute {
		t.Errorf("Pretrain's end after the restart: %+v", pretrain)
	}
}
