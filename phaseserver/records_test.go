package phaseserver

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/runlog"
)

// newLoggedServer builds a Server on dir whose log goes to the
// returned buffer.
func newLoggedServer(t *testing.T, dir string, clock *testkit.Clock) (*Server, *testkit.SyncBuffer) {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	e := New(Config{
		ProcFS: noProcFS,
		Runlog: runlog.Options{Dir: dir},
		Clock:  clock.Now,
	}, slog.New(slog.NewTextHandler(logs, nil)))
	return e, logs
}

// TestOddPhaseTableMovedAside: a phase table that is a FIFO, a symlink to
// /dev/zero or larger than 1 MiB neither hangs nor exhausts the server:
// it is moved aside as damaged, logged, and the server serves.
func TestOddPhaseTableMovedAside(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink to /dev/zero", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}},
		{"a good table padded to 2 MiB", func(t *testing.T, path string) {
			good := `{"version":1,"run":"run-20261129-120000.log","run_started":"2026-11-29T12:00:00Z","phases":[]}`
			if err := os.WriteFile(path, append([]byte(good), bytes.Repeat([]byte(" "), 2<<20)...), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.beat("Pretrain", phaseapi.EventStart, "")
			table := filepath.Join(env.dir, "run-20261129-120000.phases.json")
			if err := os.Remove(table); err != nil {
				t.Fatal(err)
			}
			tc.make(t, table)

			var e *Server
			var logs *testkit.SyncBuffer
			testkit.NoHang(t, "New", func() { e, logs = newLoggedServer(t, env.dir, env.clock) })
			if !strings.Contains(logs.String(), "phase table not restored") || !strings.Contains(logs.String(), "damaged") {
				t.Errorf("log does not say the table was damaged and moved:\n%s", logs)
			}
			if _, err := os.Lstat(table + ".damaged"); err != nil {
				t.Errorf("the odd table was not moved aside: %v", err)
			}
			// The server serves: the next ping brings the phase back and
			// saves a real table.
			if _, err := e.heartbeat("Pretrain", phaseapi.EventPing, ""); err != nil {
				t.Fatal(err)
			}
			if st, err := os.Lstat(table); err != nil || !st.Mode().IsRegular() {
				t.Errorf("no regular table saved after the ping: %v %v", st, err)
			}
		})
	}
}

// TestDamagedPhaseTablesAreNumbered: a second damaged table does not
// overwrite the first one's copy.
func TestDamagedPhaseTablesAreNumbered(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	table := filepath.Join(env.dir, "run-20261129-120000.phases.json")
	for i, damage := range []string{`{"version":1,"run":`, `{"version":7}`, `not json`} {
		if err := os.WriteFile(table, []byte(damage), 0o644); err != nil {
			t.Fatal(err)
		}
		env.restart()
		env.beat("Pretrain", phaseapi.EventPing, "")
		suffix := []string{".damaged", ".damaged-2", ".damaged-3"}[i]
		if data, err := os.ReadFile(table + suffix); err != nil || string(data) != damage {
			t.Errorf("damage %d: %s holds %q (%v), want %q", i+1, suffix, data, err, damage)
		}
	}
	for i, suffix := range []string{".damaged", ".damaged-2"} {
		want := []string{`{"version":1,"run":`, `{"version":7}`}[i]
		if data, _ := os.ReadFile(table + suffix); string(data) != want {
			t.Errorf("%s was overwritten: %q, want %q", suffix, data, want)
		}
	}
}

// TestEndLineKeepsItsMark: a long name is shortened so that the duration
// and the failed, restarted or abandoned mark always fit in the line.
func TestEndLineKeepsItsMark(t *testing.T) {
	long := strings.Repeat("Q", phaseapi.MaxPhaseNameBytes)
	wide := strings.Repeat("é", phaseapi.MaxPhaseNameBytes/2)
	for _, tc := range []struct {
		name, how string
		secs      int64
		want      string
	}{
		{long, "failed", 0, "END   " + strings.Repeat("Q", 52) + "… 0s failed"},
		{long, "", 14812, "END   " + strings.Repeat("Q", 55) + "… 14812s"},
		{long, "abandoned", 86400 * 365, "END   " + strings.Repeat("Q", 42) + "… 31536000s abandoned"},
		{wide, "restarted", 5, "END   " + strings.Repeat("é", 24) + "… 5s restarted"},
		{"Finetune", "failed", 812, "END   Finetune 812s failed"},
	} {
		p := phaseapi.Phase{Name: tc.name, Status: phaseapi.StatusOK, Started: t0, Ended: t0.Add(time.Duration(tc.secs) * time.Second)}
		if tc.how == "failed" {
			p.Status = phaseapi.StatusFailed
			tc.how = ""
		}
		got := endLine(p, tc.how)
		if got != tc.want {
			t.Errorf("endLine(%d-byte name, %q):\n got %q\nwant %q", len(tc.name), tc.how, got, tc.want)
		}
		if len(got) > runlog.MaxMessageBytes {
			t.Errorf("%q is %d bytes, over the %d an entry's message may take", got, len(got), runlog.MaxMessageBytes)
		}
	}

	// And through the run log, as a user reads it.
	env := newTestEnv(t)
	env.beat(long, phaseapi.EventStart, "")
	env.clock.Advance(3 * time.Second)
	env.beat(long, phaseapi.EventEnd, phaseapi.StatusFailed)
	entries := env.entries()
	if got := entries[len(entries)-1]; !strings.HasSuffix(got, "… 3s failed") {
		t.Errorf("END line %q lost its mark", got)
	}
}

// TestStartOfAnActivePhaseRestartsIt: a start for a phase that is running
// closes the earlier attempt in the run log before the new START, so there
// is never a START without an END.
func TestStartOfAnActivePhaseRestartsIt(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.clock.Advance(90 * time.Second)
	env.beat("Pretrain", phaseapi.EventPing, "")
	p := env.beat("Pretrain", phaseapi.EventStart, "")
	if !p.Active() || !p.Started.Equal(t0.Add(90*time.Second)) || p.Heartbeats != 1 {
		t.Errorf("restarted phase %+v, want active since the second start", p)
	}
	env.clock.Advance(10 * time.Second)
	env.beat("Pretrain", phaseapi.EventEnd, "")
	want := []string{"RUN start", "START Pretrain", "END   Pretrain 90s restarted", "START Pretrain", "END   Pretrain 10s"}
	if got := env.entries(); !equalStrings(got, want) {
		t.Errorf("entries\n%q\nwant\n%q", got, want)
	}
	// A start after an end is a new run of the phase, with nothing to close.
	env.beat("Pretrain", phaseapi.EventStart, "")
	if got := env.entries(); got[len(got)-1] != "START Pretrain" || got[len(got)-2] != "END   Pretrain 10s" {
		t.Errorf("start after an end: %q", got)
	}
}

// TestNewRunClosesTheOldOne: POST /api/v1/runs (StartRun) ends the old
// run's running phases as abandoned and writes RUN stop to the old file
// before the new run starts.
func TestNewRunClosesTheOldOne(t *testing.T) {
	env := newTestEnv(t)
	old, err := env.e.StartRun("device=cpu", "RUN start  device=cpu")
	if err != nil {
		t.Fatal(err)
	}
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.beat("Eval", phaseapi.EventStart, "")
	env.clock.Advance(time.Second)
	env.beat("Eval", phaseapi.EventEnd, "")
	env.clock.Advance(time.Minute)
	fresh, err := env.e.StartRun("device=cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	if fresh == old {
		t.Fatalf("no new run: %s", fresh)
	}
	want := []string{"RUN start  device=cpu", "START Pretrain", "START Eval", "END   Eval 1s", "END   Pretrain 61s abandoned", "RUN stop"}
	if got := entriesOf(t, old); !equalStrings(got, want) {
		t.Errorf("old run\n%q\nwant\n%q", got, want)
	}
	if got := entriesOf(t, fresh); !equalStrings(got, []string{"RUN start"}) {
		t.Errorf("new run %q", got)
	}
	// A run already stopped gets no second RUN stop.
	if err := env.e.AppendToRun(runlog.RunStop); err != nil {
		t.Fatal(err)
	}
	third, err := env.e.StartRun("", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := entriesOf(t, fresh); !equalStrings(got, []string{"RUN start", "RUN stop"}) {
		t.Errorf("a stopped run got more lines: %q", got)
	}
	if got := entriesOf(t, third); !equalStrings(got, []string{"RUN start"}) {
		t.Errorf("third run %q", got)
	}
	// serve stopped (RUN stop) while a phase ran, and started again
	// without --run.resume: the phase is abandoned in the old file, which
	// keeps its one RUN stop.
	env.beat("Train", phaseapi.EventStart, "")
	if err := env.e.AppendToRun(runlog.RunStop); err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(time.Minute)
	if _, err := env.e.StartRun("", ""); err != nil {
		t.Fatal(err)
	}
	if got, want := entriesOf(t, third), []string{"RUN start", "START Train", "RUN stop", "END   Train 60s abandoned"}; !equalStrings(got, want) {
		t.Errorf("a run stopped with a phase running\n%q\nwant\n%q", got, want)
	}
}

// entriesOf returns the entries of the run log at path, which need not be
// the current run, without their times.
func entriesOf(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return runlogtest.EntriesOf(t, string(data))
}

// TestLogsDirNotADirAtStart: a server whose logs dir cannot be listed
// at start (here a regular file) starts anyway, counts and logs the
// problem, keeps heartbeats in memory, and recovers once the dir is usable.
func TestLogsDirNotADirAtStart(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "logs")
	if err := os.WriteFile(dir, []byte("not a dir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	e, logs := newLoggedServer(t, dir, clock)
	if got := testutil.ToFloat64(e.writeErrors); got < 1 {
		t.Errorf("write errors counted: %v, want at least 1", got)
	}
	if !strings.Contains(logs.String(), "not a directory") {
		t.Errorf("the problem is not logged:\n%s", logs)
	}
	if _, err := e.heartbeat("Pretrain", phaseapi.EventStart, ""); err != nil {
		t.Fatalf("heartbeat while the dir is a file: %v", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := e.heartbeat("Eval", phaseapi.EventStart, ""); err != nil {
		t.Fatal(err)
	}
	cur, err := runlog.CurrentPath(dir)
	if err != nil {
		t.Fatalf("no run once the dir is usable: %v", err)
	}
	// Pretrain, kept in memory, is carried into the run with its START.
	if got := entriesOf(t, cur); !equalStrings(got, []string{"RUN start", "START Pretrain", "START Eval"}) {
		t.Errorf("entries once the dir is usable: %q", got)
	}
}

// nobodyEnv marks a test binary re-run as user nobody by runAsNobody.
const nobodyEnv = "LAVENDER_PHASESERVER_TEST_NOBODY"

// runAsNobody reports whether the caller should run its body now: yes when
// the process is not root (file modes bind it) or is the re-run child. As
// root it re-runs this one test as uid/gid 65534 in a child process, fails
// if the child fails, and returns false.
func runAsNobody(t *testing.T) bool {
	t.Helper()
	if os.Getenv(nobodyEnv) != "" || os.Geteuid() != 0 {
		return true
	}
	self, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary: %v", err)
	}
	// The binary sits in a root-only build dir: copy it where nobody can
	// run it.
	bin := filepath.Join(t.TempDir(), "phaseserver.test")
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(filepath.Dir(bin)); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // t.TempDir's parents are 0700
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(dst, src)
	src.Close()
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), nobodyEnv+"=1", "TMPDIR=/tmp")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "--- FAIL") || strings.Contains(string(out), "panic") {
			t.Fatalf("as uid 65534: %v\n%s", err, out)
		}
		t.Skipf("cannot run a child as uid 65534 here: %v %s", err, out)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skipf("skipped as uid 65534:\n%s", out)
	}
	t.Logf("as uid 65534:\n%s", out)
	return false
}

// TestUnreadablePhaseTableNeverOverwritten: a table that exists but cannot
// be read (mode 000, as a user the mode binds) is never replaced: the
// server keeps the phases in memory, says so, counts every refused save,
// and merges both once the table can be read again.
func TestUnreadablePhaseTableNeverOverwritten(t *testing.T) {
	if !runAsNobody(t) {
		return
	}
	dir := t.TempDir()
	clock := newFakeClock()
	e, _ := newLoggedServer(t, dir, clock)
	if _, err := e.heartbeat("Pretrain", phaseapi.EventStart, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(dir, "run-20261129-120000.phases.json")
	saved, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(table, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(table); err == nil {
		t.Skip("a mode 000 file is readable here: the test would prove nothing")
	}

	clock.Advance(time.Minute)
	e, logs := newLoggedServer(t, dir, clock)
	if !strings.Contains(logs.String(), "cannot be read") {
		t.Errorf("the unreadable table is not reported loudly:\n%s", logs)
	}
	if _, err := e.heartbeat("Eval", phaseapi.EventStart, ""); err != nil {
		t.Fatalf("heartbeat with an unreadable table: %v", err)
	}
	if _, err := e.heartbeat("Eval", phaseapi.EventPing, ""); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(e.writeErrors); got < 1 {
		t.Errorf("refused saves counted: %v, want at least 1", got)
	}
	if err := e.Close(); err == nil {
		t.Error("Close with an unreadable table: want an error, since nothing was saved")
	}
	if err := os.Chmod(table, 0o644); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(table); !bytes.Equal(data, saved) {
		t.Fatalf("the unreadable table was overwritten:\n%s\nwant\n%s", data, saved)
	}
	if p, ok := phaseOf(e, "Eval"); !ok || !p.Active() {
		t.Errorf("Eval not kept in memory: %+v", p)
	}

	// Readable again: the next save merges the table's phases with the
	// ones kept in memory.
	clock.Advance(time.Minute)
	if _, err := e.heartbeat("Eval", phaseapi.EventEnd, ""); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Pretrain", "Eval"} {
		if _, ok := phaseOf(e, name); !ok {
			t.Errorf("%s missing after the table became readable", name)
		}
	}
	e2, _ := newLoggedServer(t, dir, clock)
	if p, ok := phaseOf(e2, "Pretrain"); !ok || !p.Active() || !p.Started.Equal(t0) {
		t.Errorf("Pretrain after a restart: %+v (found %v)", p, ok)
	}
	if p, ok := phaseOf(e2, "Eval"); !ok || p.Status != phaseapi.StatusOK {
		t.Errorf("Eval after a restart: %+v (found %v)", p, ok)
	}
}

func phaseOf(e *Server, name string) (phaseapi.Phase, bool) {
	_, phases := e.Snapshot()
	for _, p := range phases {
		if p.Name == name {
			return p, true
		}
	}
	return phaseapi.Phase{}, false
}

// TestLogsDirNotListable: a logs dir with mode 0300 (write and search, no
// read), as a user the mode binds, does not stop the server either.
func TestLogsDirNotListable(t *testing.T) {
	if !runAsNobody(t) {
		return
	}
	dir := filepath.Join(t.TempDir(), "logs")
	if err := os.Mkdir(dir, 0o300); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(dir); err == nil {
		t.Skip("a mode 0300 dir can be listed here: the test would prove nothing")
	}
	clock := newFakeClock()
	e, logs := newLoggedServer(t, dir, clock)
	if got := testutil.ToFloat64(e.writeErrors); got < 1 {
		t.Errorf("write errors counted: %v, want at least 1", got)
	}
	if !strings.Contains(logs.String(), "permission denied") {
		t.Errorf("the problem is not logged:\n%s", logs)
	}
	if _, err := e.heartbeat("Pretrain", phaseapi.EventStart, ""); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := e.heartbeat("Pretrain", phaseapi.EventEnd, ""); err != nil {
		t.Fatal(err)
	}
	cur, err := runlog.CurrentPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The START lost while nothing could be written (and counted) is
	// written into the run that the phase, kept in memory, is carried into.
	if got := entriesOf(t, cur); !equalStrings(got, []string{"RUN start", "START Pretrain", "END   Pretrain 1s"}) {
		t.Errorf("entries once the dir is usable: %q", got)
	}
}
