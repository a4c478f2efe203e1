package phaseserver

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/runlog"
)

// t0 is 2026-11-29 12:00:00 UTC; tests run in UTC so run-log names and
// entry times are fixed.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newFakeClock() *testkit.Clock { return testkit.NewClock(t0) }

type testEnv struct {
	t     testing.TB
	dir   string
	clock *testkit.Clock
	e     *Server
	reg   *prometheus.Registry
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	env := &testEnv{t: t, dir: t.TempDir(), clock: newFakeClock()}
	env.restart()
	return env
}

// restart builds a new Server on the same directory, as a process
// restart would.
func (env *testEnv) restart() {
	env.t.Helper()
	env.reg = prometheus.NewPedanticRegistry()
	e := New(Config{
		ProcFS: noProcFS,
		Runlog: runlog.Options{Dir: env.dir},
		Clock:  env.clock.Now,
	}, slog.New(slog.DiscardHandler))
	env.reg.MustRegister(e)
	env.e = e
}

func (env *testEnv) beat(name, event, status string) phaseapi.Phase {
	env.t.Helper()
	p, err := env.e.heartbeat(name, event, status)
	if err != nil {
		env.t.Fatalf("%s %s %q: %v", event, status, name, err)
	}
	return p
}

// entries returns the current run log's entries without their time stamps.
func (env *testEnv) entries() []string { return runlogtest.Entries(env.t, env.dir) }

func (env *testEnv) phase(name string) (phaseapi.Phase, bool) {
	_, phases := env.e.Snapshot()
	for _, p := range phases {
		if p.Name == name {
			return p, true
		}
	}
	return phaseapi.Phase{}, false
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n") && len(a) == len(b)
}

func TestPhaseLifecycle(t *testing.T) {
	env := newTestEnv(t)
	if _, err := env.e.StartRun("device=cuda lavender_2=v0.2.3", ""); err != nil {
		t.Fatal(err)
	}
	p := env.beat("  Pretrain 1/3\t", phaseapi.EventStart, "")
	if p.Name != "Pretrain 1/3" || !p.Active() || !p.Started.Equal(t0) || p.Heartbeats != 1 {
		t.Fatalf("after start: %+v", p)
	}
	env.clock.Advance(time.Hour)
	p = env.beat("Pretrain 1/3", phaseapi.EventPing, "")
	if !p.LastHeartbeat.Equal(t0.Add(time.Hour)) || p.Heartbeats != 2 || p.DurationSeconds != 3600 {
		t.Fatalf("after ping: %+v", p)
	}
	goldenCompare(t, (*phaseCollector)(env.e), func() prometheus.Collector { return (*phaseCollector)(env.e) }, "phases_active")

	env.clock.Advance(14812*time.Second - time.Hour)
	p = env.beat("Pretrain 1/3", phaseapi.EventEnd, "")
	if p.Status != phaseapi.StatusOK || !p.Ended.Equal(t0.Add(14812*time.Second)) || p.DurationSeconds != 14812 {
		t.Fatalf("after end: %+v", p)
	}
	env.beat("Finetune", phaseapi.EventStart, "")
	env.clock.Advance(812*time.Second + 900*time.Millisecond) // durations are cut to whole seconds
	env.beat("Finetune", phaseapi.EventEnd, phaseapi.StatusFailed)
	env.clock.Advance(time.Hour) // a finished phase's duration stays final

	want := []string{"RUN start", "START Pretrain 1/3", "END   Pretrain 1/3 14812s", "START Finetune", "END   Finetune 812s failed"}
	if got := env.entries(); !equalStrings(got, want) {
		t.Errorf("run log entries:\n%q\nwant\n%q", got, want)
	}
	goldenCompare(t, (*phaseCollector)(env.e), func() prometheus.Collector { return (*phaseCollector)(env.e) }, "phases_ended")

	// A new start runs an ended phase again from scratch.
	p = env.beat("Finetune", phaseapi.EventStart, "")
	if !p.Active() || p.Heartbeats != 1 || !p.Ended.IsZero() {
		t.Errorf("restarted phase: %+v", p)
	}
}

func TestPingsLeaveNoLogLineButAFirstSighting(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	before := env.entries()
	for range 50 {
		env.clock.Advance(time.Minute)
		env.beat("Pretrain", phaseapi.EventPing, "")
	}
	if got := env.entries(); !equalStrings(got, before) {
		t.Errorf("pings changed the run log:\n%q\nwant\n%q", got, before)
	}
	// A ping for an unknown phase (a serve restarted mid-run) starts it
	// with its START line, so that its END has one and its duration
	// counts from the line.
	env.beat("Eval", phaseapi.EventPing, "")
	env.beat("Eval", phaseapi.EventPing, "")
	env.clock.Advance(39 * time.Second)
	env.beat("Eval", phaseapi.EventEnd, "")
	if got, want := env.entries(), append(before, "START Eval", "END   Eval 39s"); !equalStrings(got, want) {
		t.Errorf("a phase first seen by a ping:\n%q\nwant\n%q", got, want)
	}
	if p, _ := env.phase("Pretrain"); p.Heartbeats != 51 {
		t.Errorf("heartbeats = %d, want 51", p.Heartbeats)
	}
	if p, ok := env.phase("Eval"); !ok || p.Active() || p.Heartbeats != 3 {
		t.Errorf("the phase a ping started: %+v", p)
	}
}

// The first heartbeat in an empty directory starts a run, as runlog's
// AppendCurrent does.
func TestHeartbeatStartsRun(t *testing.T) {
	env := newTestEnv(t)
	if run, _ := env.e.Snapshot(); run != nil {
		t.Fatalf("run before any heartbeat: %+v", run)
	}
	env.beat("Pretrain", phaseapi.EventStart, "")
	run, _ := env.e.Snapshot()
	if run == nil || run.File != "run-20261129-120000.log" || !run.Started.Equal(t0) {
		t.Fatalf("run = %+v", run)
	}
	if got, want := env.entries(), []string{"RUN start", "START Pretrain"}; !equalStrings(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
}

func TestRestartRecovery(t *testing.T) {
	env := newTestEnv(t)
	if _, err := env.e.StartRun("", "RUN start  device=cuda"); err != nil {
		t.Fatal(err)
	}
	env.beat("Pretrain 1/3", phaseapi.EventStart, "")
	env.beat("Warmup", phaseapi.EventStart, "")
	env.clock.Advance(time.Minute)
	env.beat("Warmup", phaseapi.EventEnd, "")
	env.clock.Advance(time.Hour)
	env.beat("Pretrain 1/3", phaseapi.EventPing, "") // saved: the last save is an hour old
	env.clock.Advance(time.Second)
	env.beat("Pretrain 1/3", phaseapi.EventPing, "") // throttled: kept in memory only

	// A crash: no Close. Five hours into the phase the server is back.
	env.clock.Advance(5*time.Hour - time.Hour - time.Minute - time.Second)
	env.restart()
	p, ok := env.phase("Pretrain 1/3")
	if !ok || !p.Active() || !p.Started.Equal(t0) {
		t.Fatalf("after restart: %+v (found %v), want active since %v", p, ok, t0)
	}
	if p.DurationSeconds != 5*3600 {
		t.Errorf("duration = %v, want 18000", p.DurationSeconds)
	}
	if p.Heartbeats != 2 || !p.LastHeartbeat.Equal(t0.Add(time.Hour+time.Minute)) {
		t.Errorf("heartbeats %d at %v: want the last saved ping (2 at +1h1m)", p.Heartbeats, p.LastHeartbeat)
	}
	if w, ok := env.phase("Warmup"); !ok || w.Status != phaseapi.StatusOK || w.DurationSeconds != 60 {
		t.Errorf("ended phase after restart: %+v", w)
	}
	if run, _ := env.e.Snapshot(); run == nil || !run.Started.Equal(t0) {
		t.Errorf("run after restart: %+v", run)
	}

	// Close saves throttled pings, so a clean restart loses nothing.
	env.beat("Pretrain 1/3", phaseapi.EventPing, "")
	env.clock.Advance(time.Second)
	env.beat("Pretrain 1/3", phaseapi.EventPing, "")
	if err := env.e.Close(); err != nil {
		t.Fatal(err)
	}
	env.restart()
	if p, _ := env.phase("Pretrain 1/3"); p.Heartbeats != 4 {
		t.Errorf("heartbeats after clean restart = %d, want 4", p.Heartbeats)
	}

	env.beat("Pretrain 1/3", phaseapi.EventEnd, "")
	want := []string{"RUN start  device=cuda", "START Pretrain 1/3", "START Warmup", "END   Warmup 60s", "END   Pretrain 1/3 18001s"}
	if got := env.entries(); !equalStrings(got, want) {
		t.Errorf("entries\n%q\nwant\n%q", got, want)
	}
}

func TestStartRunClearsPhases(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.clock.Advance(time.Second) // a new run log name
	path, err := env.e.StartRun("device=cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "run-20261129-120001.log" {
		t.Errorf("path = %s", path)
	}
	if _, phases := env.e.Snapshot(); len(phases) != 0 {
		t.Errorf("phases after a new run: %+v", phases)
	}
	// The table is keyed to the run: the old run's table stays with it.
	env.restart()
	if _, phases := env.e.Snapshot(); len(phases) != 0 {
		t.Errorf("the new run inherited phases after restart: %+v", phases)
	}
	if _, err := os.Stat(filepath.Join(env.dir, "run-20261129-120000.phases.json")); err != nil {
		t.Errorf("old run's table: %v", err)
	}
}

// A run started by another process (lavender runlog new) is followed at
// the next heartbeat, with a clean table.
func TestFollowsRunStartedElsewhere(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.clock.Advance(time.Minute)
	if _, err := runlog.Start(runlog.Options{Dir: env.dir, Now: env.clock.Now}, "", runlog.RunStart); err != nil {
		t.Fatal(err)
	}
	if _, err := env.e.heartbeat("Pretrain", phaseapi.EventEnd, ""); !errors.Is(err, errUnknownPhase) {
		t.Errorf("end in the new run: err = %v, want ErrUnknownPhase", err)
	}
	env.beat("Finetune", phaseapi.EventStart, "")
	run, phases := env.e.Snapshot()
	if run.File != "run-20261129-120100.log" || len(phases) != 1 || phases[0].Name != "Finetune" {
		t.Errorf("run %+v phases %+v", run, phases)
	}
}

func TestPhaseCap(t *testing.T) {
	env := newTestEnv(t)
	name := func(i int) string { return fmt.Sprintf("phase %02d", i) }
	for i := range maxPhases {
		env.beat(name(i), phaseapi.EventStart, "")
	}
	table := snapshotState(t, env)
	for _, event := range []string{phaseapi.EventStart, phaseapi.EventPing} {
		if _, err := env.e.heartbeat("one too many", event, ""); !errors.Is(err, errTooManyPhases) {
			t.Errorf("%s of a 65th active phase: err = %v, want ErrTooManyPhases", event, err)
		}
	}
	if got := snapshotState(t, env); got != table {
		t.Errorf("a refused phase changed the state:\n%s\nwant\n%s", got, table)
	}
	// Existing phases still work at the cap.
	env.beat(name(0), phaseapi.EventPing, "")

	env.clock.Advance(time.Second)
	env.beat(name(5), phaseapi.EventEnd, "")
	env.clock.Advance(time.Second)
	env.beat(name(3), phaseapi.EventEnd, phaseapi.StatusFailed)
	env.beat("new 1", phaseapi.EventStart, "") // evicts phase 05, the first to end
	if _, ok := env.phase(name(5)); ok {
		t.Error("phase 05 (ended first) not evicted")
	}
	if _, ok := env.phase(name(3)); !ok {
		t.Error("phase 03 evicted before phase 05")
	}
	env.beat("new 2", phaseapi.EventPing, "") // evicts phase 03
	_, phases := env.e.Snapshot()
	if len(phases) != maxPhases {
		t.Errorf("%d phases, want %d", len(phases), maxPhases)
	}
	if _, ok := env.phase(name(3)); ok {
		t.Error("phase 03 not evicted")
	}
	if n := testutil.CollectAndCount((*phaseCollector)(env.e), "lavender_phase_active"); n != maxPhases {
		t.Errorf("%d lavender_phase_active series, want %d", n, maxPhases)
	}
	if _, err := env.e.heartbeat("new 3", phaseapi.EventStart, ""); !errors.Is(err, errTooManyPhases) {
		t.Errorf("start with 64 active phases: err = %v", err)
	}
}

func TestHeartbeatErrors(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.beat("Done", phaseapi.EventStart, "")
	env.beat("Done", phaseapi.EventEnd, "")
	for _, tc := range []struct {
		name, event, status string
		want                error
	}{
		{"", phaseapi.EventStart, "", phaseapi.ErrBadPhaseName},
		{" \t ", phaseapi.EventPing, "", phaseapi.ErrBadPhaseName},
		{strings.Repeat("x", 65), phaseapi.EventStart, "", phaseapi.ErrBadPhaseName},
		{"new\nline", phaseapi.EventStart, "", phaseapi.ErrBadPhaseName},
		{"bell\a", phaseapi.EventStart, "", phaseapi.ErrBadPhaseName},
		{"bad \xff utf8", phaseapi.EventStart, "", phaseapi.ErrBadPhaseName},
		{"Pretrain", "stop", "", errBadEvent},
		{"Pretrain", "", "", errBadEvent},
		{"Pretrain", phaseapi.EventEnd, "crashed", errBadStatus},
		{"Pretrain", phaseapi.EventStart, phaseapi.StatusOK, errBadStatus},
		{"Pretrain", phaseapi.EventPing, phaseapi.StatusFailed, errBadStatus},
		{"Never started", phaseapi.EventEnd, "", errUnknownPhase},
		{"Done", phaseapi.EventEnd, phaseapi.StatusOK, errPhaseEnded},
		{"Done", phaseapi.EventPing, "", errPhaseEnded},
	} {
		before := snapshotState(t, env)
		_, err := env.e.heartbeat(tc.name, tc.event, tc.status)
		if !errors.Is(err, tc.want) {
			t.Errorf("%q %q %q: err = %v, want %v", tc.name, tc.event, tc.status, err, tc.want)
		}
		if after := snapshotState(t, env); after != before {
			t.Errorf("%q %q %q changed the state:\n%s\nwant\n%s", tc.name, tc.event, tc.status, after, before)
		}
	}
	// 64 bytes of multi-byte runes is fine; the limit is in bytes.
	env.beat(strings.Repeat("é", 32), phaseapi.EventStart, "")
}

// snapshotState renders everything a heartbeat may change: the table in
// memory, the saved table and the run log.
func snapshotState(t *testing.T, env *testEnv) string {
	t.Helper()
	run, phases := env.e.Snapshot()
	var b strings.Builder
	fmt.Fprintf(&b, "run %+v\n", run)
	for _, p := range phases {
		if p.ETASeconds != nil { // a fresh pointer every answer: print what it holds
			fmt.Fprintf(&b, "eta %v ", *p.ETASeconds)
			p.ETASeconds = nil
		}
		fmt.Fprintf(&b, "%+v\n", p)
	}
	files, _ := filepath.Glob(filepath.Join(env.dir, "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "== %s\n%s", filepath.Base(f), data)
	}
	return b.String()
}

func TestDamagedPhaseFileMovedAside(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	saved := filepath.Join(env.dir, "run-20261129-120000.phases.json")
	if err := os.WriteFile(saved, []byte(`{"version":1,"run":`), 0o644); err != nil {
		t.Fatal(err)
	}
	env.restart()
	if _, phases := env.e.Snapshot(); len(phases) != 0 {
		t.Errorf("phases from a damaged file: %+v", phases)
	}
	if data, err := os.ReadFile(saved + ".damaged"); err != nil || string(data) != `{"version":1,"run":` {
		t.Errorf("damaged file not kept aside: %q, %v", data, err)
	}
	// The next ping brings the phase back.
	env.beat("Pretrain", phaseapi.EventPing, "")
	if p, ok := env.phase("Pretrain"); !ok || !p.Active() {
		t.Errorf("phase not recovered by a ping: %+v", p)
	}
}

func TestDecodeTableRejects(t *testing.T) {
	const run = "run-20261129-120000.log"
	ok := `{"name":"A","status":"active","started":"2026-11-29T12:00:00Z","last_heartbeat":"2026-11-29T12:00:00Z","heartbeats":1}`
	for _, data := range []string{
		`[]`,
		`{"version":2,"run":"` + run + `","phases":[]}`,
		`{"version":1,"run":"run-other.log","phases":[]}`,
		`{"version":1,"run":"` + run + `","phases":[` + ok + `,` + ok + `]}`,
		`{"version":1,"run":"` + run + `","phases":[{"name":" A","status":"active","started":"2026-11-29T12:00:00Z"}]}`,
		`{"version":1,"run":"` + run + `","phases":[{"name":"A","status":"ok","started":"2026-11-29T12:00:00Z"}]}`,
		`{"version":1,"run":"` + run + `","phases":[{"name":"A","status":"paused","started":"2026-11-29T12:00:00Z"}]}`,
		`{"version":1,"run":"` + run + `","phases":[{"name":"A","status":"active"}]}`,
	} {
		if _, err := decodeTable([]byte(data), run); err == nil {
			t.Errorf("accepted %s", data)
		}
	}
	if _, err := decodeTable([]byte(`{"version":1,"run":"`+run+`","phases":[`+ok+`]}`), run); err != nil {
		t.Errorf("rejected a good table: %v", err)
	}
}

// TestFailureReasonIsAnInfoSeries: a phase that ended failed with a
// reason has lavender_phase_failure_info with the reason in a label, for
// the PhaseFailed alert to quote; an ok end, a running phase and a failure
// without a reason have none.
func TestFailureReasonIsAnInfoSeries(t *testing.T) {
	env := newTestEnv(t)
	for _, req := range []phaseapi.HeartbeatRequest{
		{Phase: "Pretrain 1/3", Event: phaseapi.EventStart},
		{Phase: "Pretrain 1/3", Event: phaseapi.EventEnd, Status: phaseapi.StatusFailed, Reason: "RuntimeError: CUDA out of memory"},
		{Phase: "Eval", Event: phaseapi.EventStart},
		{Phase: "Eval", Event: phaseapi.EventEnd},
		{Phase: "Quiet", Event: phaseapi.EventStart},
		{Phase: "Quiet", Event: phaseapi.EventEnd, Status: phaseapi.StatusFailed},
		{Phase: "Train", Event: phaseapi.EventStart},
	} {
		if _, err := env.e.Apply(req); err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	m, err := testkit.GatherMetrics(env.reg)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := m.Value("lavender_phase_failure_info", testkit.Labels{"phase": "Pretrain 1/3", "reason": "RuntimeError: CUDA out of memory"}); err != nil || v != 1 {
		t.Errorf("the failed phase's info: %v, %v", v, err)
	}
	for _, phase := range []string{"Eval", "Quiet", "Train"} {
		if v, err := m.Value("lavender_phase_failure_info", testkit.Labels{"phase": phase}); err == nil {
			t.Errorf("%s has a failure info series (%v)", phase, v)
		}
	}
}

// A run taken over at the start from the table a stopped process saved
// says when: its phases' pings before then reached no one. A run this
// process started, or followed from a live writer, says nothing.
func TestResumedRunSaysWhenItWasTakenOver(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	if run, _ := env.e.Snapshot(); !run.Resumed.IsZero() {
		t.Errorf("a run started here: resumed %v, want zero", run.Resumed)
	}
	env.clock.Advance(12 * time.Minute)
	env.restart()
	if run, _ := env.e.Snapshot(); run == nil || !run.Resumed.Equal(env.clock.Now()) {
		t.Errorf("run %+v after the restart, want resumed at %v", run, env.clock.Now())
	}
	env.clock.Advance(time.Minute)
	if _, err := runlog.Start(runlog.Options{Dir: env.dir, Now: env.clock.Now}, "", runlog.RunStart); err != nil {
		t.Fatal(err)
	}
	env.beat("Finetune", phaseapi.EventStart, "")
	if run, _ := env.e.Snapshot(); !run.Resumed.IsZero() {
		t.Errorf("a run followed from another process: resumed %v, want zero", run.Resumed)
	}
}

// A failed end followed by a new start of the phase before the next scrape
// (a retry loop around `lavender phase run`): the row starts over, but
// lavender_phase_failures_total keeps counting, and the latest failure's
// duration and reason stay on /metrics for PhaseFailed. A restart of the
// server keeps the count (the saved table holds it), so the counter only
// rises within a run.
func TestFailuresCounterSurvivesARestartOfThePhase(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.clock.Advance(10 * time.Minute)
	if _, err := env.e.Apply(phaseapi.HeartbeatRequest{Phase: "Pretrain", Event: phaseapi.EventEnd, Status: phaseapi.StatusFailed, Reason: "RuntimeError: CUDA out of memory"}); err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(200 * time.Millisecond)
	env.beat("Pretrain", phaseapi.EventStart, "")
	env.beat("Eval", phaseapi.EventStart, "")
	env.clock.Advance(time.Minute)

	check := func(when string, failures float64) {
		t.Helper()
		m, err := testkit.GatherMetrics(env.reg)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := m.Value("lavender_phase_failures_total", testkit.Labels{"phase": "Pretrain"}); err != nil || v != failures {
			t.Errorf("%s: lavender_phase_failures_total{Pretrain} %v (%v), want %v", when, v, err, failures)
		}
		if v, err := m.Value("lavender_phase_failures_total", testkit.Labels{"phase": "Eval"}); err != nil || v != 0 {
			t.Errorf("%s: lavender_phase_failures_total{Eval} %v (%v), want 0", when, v, err)
		}
		if v, err := m.Value("lavender_phase_last_failure_duration_seconds", testkit.Labels{"phase": "Pretrain"}); err != nil || v != 600 {
			t.Errorf("%s: lavender_phase_last_failure_duration_seconds{Pretrain} %v (%v), want 600", when, v, err)
		}
		if v, err := m.Value("lavender_phase_failure_info", testkit.Labels{"phase": "Pretrain", "reason": "RuntimeError: CUDA out of memory"}); err != nil || v != 1 {
			t.Errorf("%s: the restarted phase's failure info %v (%v)", when, v, err)
		}
		if v, err := m.Value("lavender_phase_active", testkit.Labels{"phase": "Pretrain"}); err != nil || v != 1 {
			t.Errorf("%s: Pretrain active %v (%v), want 1", when, v, err)
		}
		for _, name := range []string{"lavender_phase_last_failure_duration_seconds", "lavender_phase_failure_info"} {
			if v, err := m.Value(name, testkit.Labels{"phase": "Eval"}); err == nil {
				t.Errorf("%s: Eval, never failed, has %s (%v)", when, name, v)
			}
		}
	}
	check("after the restart of the phase", 1)
	env.restart()
	check("after a restart of the server", 1)

	// A second failure: the count rises, the latest failure is the new
	// one.
	env.clock.Advance(4 * time.Minute)
	if _, err := env.e.Apply(phaseapi.HeartbeatRequest{Phase: "Pretrain", Event: phaseapi.EventEnd, Status: phaseapi.StatusFailed, Reason: "killed by SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	env.beat("Pretrain", phaseapi.EventStart, "")
	m, err := testkit.GatherMetrics(env.reg)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := m.Value("lavender_phase_failures_total", testkit.Labels{"phase": "Pretrain"}); err != nil || v != 2 {
		t.Errorf("after the second failure: %v (%v), want 2", v, err)
	}
	if v, err := m.Value("lavender_phase_last_failure_duration_seconds", testkit.Labels{"phase": "Pretrain"}); err != nil || v != 300 {
		t.Errorf("after the second failure: last failure's duration %v (%v), want 300", v, err)
	}
	if v, err := m.Value("lavender_phase_failure_info", testkit.Labels{"phase": "Pretrain", "reason": "killed by SIGKILL"}); err != nil || v != 1 {
		t.Errorf("after the second failure: info %v (%v)", v, err)
	}
}
