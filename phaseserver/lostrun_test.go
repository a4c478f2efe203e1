package phaseserver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/runlog"
)

// phaseTables lists the saved phase tables in dir.
func phaseTables(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+phaseFileSuffix))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}

// wantRunning fails unless the server holds phase name running since
// started.
func wantRunning(t *testing.T, e *Server, name string, started time.Time) {
	t.Helper()
	_, phases := e.Snapshot()
	for _, p := range phases {
		if p.Name == name {
			if !p.Active() || !p.Started.Equal(started) {
				t.Errorf("phase %q: status %s, started %v; want running since %v", name, p.Status, p.Started, started)
			}
			return
		}
	}
	t.Errorf("phase %q is forgotten: %+v", name, phases)
}

// TestDeletedLogsDirKeepsTheRunningPhases: the logs dir deleted while
// phases run (rm -rf logs, to free a full disk). The next heartbeat starts
// a run that carries every phase: a silent one stays watched, its ok end
// is taken and pushed, the pinging one keeps its start, and the new run
// log has the START lines its END lines need.
func TestDeletedLogsDirKeepsTheRunningPhases(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.beat("Eval", phaseapi.EventStart, "")
	env.beat("Tokenize", phaseapi.EventStart, "")
	env.beat("Tokenize", phaseapi.EventEnd, "ok")
	if err := os.RemoveAll(env.dir); err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(time.Minute)
	env.beat("Pretrain", phaseapi.EventPing, "")
	wantRunning(t, env.e, "Pretrain", t0)
	wantRunning(t, env.e, "Eval", t0)
	if p, ok := env.phase("Tokenize"); !ok || p.Status != phaseapi.StatusOK {
		t.Errorf("the ended phase Tokenize is not kept as it ended: %+v", p)
	}
	if got, want := env.entries(), []string{"RUN start", "START Pretrain", "START Eval"}; !equalStrings(got, want) {
		t.Errorf("the new run's entries: %q, want %q", got, want)
	}
	env.clock.Advance(time.Minute)
	env.beat("Eval", phaseapi.EventEnd, "ok")
	ends := env.e.Ends()
	if last := ends[len(ends)-1]; last.Phase != "Eval" || last.Status != phaseapi.StatusOK || last.Ended.Sub(last.Started) != 2*time.Minute {
		t.Errorf("Eval's end for the watchdog: %+v, want ok after 2m", last)
	}
	// The carried phases are saved with the new run.
	env.restart()
	wantRunning(t, env.e, "Pretrain", t0)
}

// TestARunAnotherWriterStartsTakesThePhasesKeptInMemory: serve started
// while the logs dir was unusable keeps its phases in memory; once the dir
// is usable, a push's BARK line (the bridge's runlog.AppendCurrent) starts
// the run before any heartbeat. The server takes that run with its phases.
func TestARunAnotherWriterStartsTakesThePhasesKeptInMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	if err := os.WriteFile(dir, []byte("not a dir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	e, _ := newLoggedServer(t, dir, clock)
	if _, err := e.heartbeat("Pretrain", phaseapi.EventStart, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := runlog.AppendCurrent(runlog.Options{Dir: dir, Now: clock.Now}, "BARK disk floor /data sent ok=1 fail=0"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.heartbeat("Eval", phaseapi.EventStart, ""); err != nil {
		t.Fatal(err)
	}
	wantRunning(t, e, "Pretrain", t0)
	cur, err := runlog.CurrentPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entriesOf(t, cur), []string{"RUN start", "BARK disk floor /data sent ok=1 fail=0", "START Pretrain", "START Eval"}; !equalStrings(got, want) {
		t.Errorf("entries: %q, want %q", got, want)
	}
	if _, err := e.heartbeat("Pretrain", phaseapi.EventEnd, "ok"); err != nil {
		t.Errorf("Pretrain's ok end: %v", err)
	}
}

// TestEmptiedLogsDirWithAnotherWritersRunKeepsThePhases: the logs dir
// deleted and, before the next heartbeat, made anew by another writer's
// run. The phases go into that run, and the old run's table is not saved
// into the new dir, where no run log would go with it.
func TestEmptiedLogsDirWithAnotherWritersRunKeepsThePhases(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.beat("Eval", phaseapi.EventStart, "")
	env.clock.Advance(time.Second)
	env.beat("Eval", phaseapi.EventPing, "") // not saved yet: pings save every 10 s
	if err := os.RemoveAll(env.dir); err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(time.Minute)
	if err := runlog.AppendCurrent(runlog.Options{Dir: env.dir, Now: env.clock.Now}, "BARK resolved disk floor sent ok=1 fail=0"); err != nil {
		t.Fatal(err)
	}
	env.beat("Pretrain", phaseapi.EventPing, "")
	wantRunning(t, env.e, "Pretrain", t0)
	wantRunning(t, env.e, "Eval", t0)
	if got, want := phaseTables(t, env.dir), []string{"run-20261129-120101.phases.json"}; !equalStrings(got, want) {
		ls, _ := os.ReadDir(env.dir)
		t.Errorf("phase tables in the new dir: %q, want only the new run's %q (%v)", got, want, ls)
	}
}

// TestTableOfAVanishedRunIsNotSavedIntoANewDir: the logs dir deleted and
// made anew, empty, while a ping's changes wait to be saved; Close at
// shutdown (as a process check's save) must not leave the old run's table
// there without its log. It says nothing was saved.
func TestTableOfAVanishedRunIsNotSavedIntoANewDir(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.clock.Advance(time.Second)
	env.beat("Pretrain", phaseapi.EventPing, "")
	if err := os.RemoveAll(env.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(env.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := env.e.Close(); err == nil || !strings.Contains(err.Error(), "run log is gone") {
		t.Errorf("Close: %v, want it to say the run log is gone", err)
	}
	if got := phaseTables(t, env.dir); len(got) != 0 {
		t.Errorf("tables saved without their run log: %q", got)
	}
}

// TestPhasesKeptOnAFullDiskSurviveTheResolutionPush: on a real full tmpfs,
// serve cannot start a run, so its phase lives in memory; the checkpoint
// that filled the disk is deleted and the disk guard's resolution push
// writes its BARK line first, starting the run. The phase keeps its start
// and gets its START line there.
func TestPhasesKeptOnAFullDiskSurviveTheResolutionPush(t *testing.T) {
	dir := testkit.MountTmpfs(t, "size=64k")
	filler := filepath.Join(dir, "checkpoint.pt")
	if err := testkit.WriteFileOfSize(filler, 1<<20); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, want no space left", err)
	}
	clock := newFakeClock()
	e, _ := newLoggedServer(t, dir, clock)
	if _, err := e.StartRun("", runlog.RunStart); err == nil {
		t.Fatal("a run started on a full disk")
	}
	if _, err := e.heartbeat("Pretrain", phaseapi.EventStart, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := runlog.AppendCurrent(runlog.Options{Dir: dir, Now: clock.Now}, "BARK resolved disk floor sent ok=1 fail=0"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.heartbeat("Pretrain", phaseapi.EventPing, ""); err != nil {
		t.Fatal(err)
	}
	wantRunning(t, e, "Pretrain", t0)
	cur, err := runlog.CurrentPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entriesOf(t, cur), []string{"RUN start", "BARK resolved disk floor sent ok=1 fail=0", "START Pretrain"}; !equalStrings(got, want) {
		t.Errorf("entries: %q, want %q", got, want)
	}
}
