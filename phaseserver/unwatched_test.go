package phaseserver

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/runlog"
)

// restartRig is a phase running pid 4242 under one server, then a second
// server on the same logs dir and procfs, as after a restart of serve.
type restartRig struct {
	t     *testing.T
	clock *testkit.Clock
	procs *fakeProcs
	dir   string
	e     *Server
}

func newRestartRig(t *testing.T) *restartRig {
	r := &restartRig{t: t, clock: newFakeClock(), procs: newFakeProcs(t, t0.Add(-time.Hour)), dir: t.TempDir()}
	r.e = r.server()
	r.procs.proc(4242, "S", 59*60*100)
	pid := int64(4242)
	if _, err := r.e.Apply(phaseapi.HeartbeatRequest{Phase: "Train", Event: phaseapi.EventStart, PID: &pid, BootID: fakeBootID, PIDNS: fakePIDNS}); err != nil {
		t.Fatal(err)
	}
	r.e.CheckProcesses()
	r.clock.Advance(time.Minute)
	if _, err := r.e.Apply(phaseapi.HeartbeatRequest{Phase: "Train", Event: phaseapi.EventPing}); err != nil {
		t.Fatal(err)
	}
	if err := r.e.Close(); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *restartRig) server() *Server {
	return New(Config{ProcFS: r.procs.dir, Runlog: runlog.Options{Dir: r.dir}, Clock: r.clock.Now}, slog.New(slog.DiscardHandler))
}

// restartAfterTheProcessEnded: the process ends while serve is down, and
// serve comes back 30 s after the last ping.
func (r *restartRig) restartAfterTheProcessEnded() {
	r.procs.gone(4242)
	r.clock.Advance(30 * time.Second)
	r.e = r.server()
}

// checkFor runs the process check once a second for d.
func (r *restartRig) checkFor(d time.Duration) {
	for range int(d / time.Second) {
		r.e.CheckProcesses()
		r.clock.Advance(time.Second)
	}
}

// TestPhaseEndedWhileServeWasDownIsNotADeath: serve restarts and finds
// the process of a phase from its saved table gone. It waits
// inheritedEndGrace for the end that the wrapper tries again, and without
// one ends the phase as over, how it ended unknown: not failed, not
// "died without ending", absent from lavender_phase_failed; a late end
// still says how it ended.
func TestPhaseEndedWhileServeWasDownIsNotADeath(t *testing.T) {
	r := newRestartRig(t)
	r.restartAfterTheProcessEnded()
	r.checkFor(inheritedEndGrace - time.Second)
	if p, _ := findPhase(r.e, "Train"); !p.Active() {
		t.Fatalf("judged within the grace for the wrapper's end: %s %q", p.Status, p.Reason)
	}
	r.checkFor(2 * time.Second)
	p, _ := findPhase(r.e, "Train")
	if want := "ended while lavender was down, its end never arrived (pid 4242 gone)"; p.Status != phaseapi.StatusUnknown || p.Reason != want {
		t.Errorf("phase %s %q, want %s %q", p.Status, p.Reason, phaseapi.StatusUnknown, want)
	}
	if !p.Ended.Equal(t0.Add(time.Minute)) {
		t.Errorf("ended at %v, want its last heartbeat %v", p.Ended, t0.Add(time.Minute))
	}
	ends := r.e.Ends()
	if len(ends) != 1 || ends[0].Status != phaseapi.StatusUnknown || !ends[0].Died || ends[0].PID != 4242 {
		t.Errorf("ends for the watchdog %+v, want one of unknown outcome", ends)
	}
	if got := runlogtest.Entries(t, r.dir); got[len(got)-1] != "END   Train 60s unknown" {
		t.Errorf("run log ends %q, want END   Train 60s unknown", got[len(got)-1])
	}
	if n := testutil.CollectAndCount(r.e, "lavender_phase_failed"); n != 0 {
		t.Errorf("lavender_phase_failed has %d series for a phase whose outcome is unknown, want none", n)
	}
	if n := testutil.CollectAndCount(r.e, "lavender_phase_end_timestamp_seconds"); n != 1 {
		t.Errorf("lavender_phase_end_timestamp_seconds: %d series, want the phase's end", n)
	}
	// Restarted again, the phase stays as it ended.
	r.e = r.server()
	if p, _ := findPhase(r.e, "Train"); p.Status != phaseapi.StatusUnknown {
		t.Errorf("after a restart: %s", p.Status)
	}
	// The end that never came, late: it settles how the phase ended.
	if _, err := r.e.Apply(phaseapi.HeartbeatRequest{Phase: "Train", Event: phaseapi.EventEnd, Status: phaseapi.StatusOK}); err != nil {
		t.Fatalf("a late ok end: %v", err)
	}
	if p, _ := findPhase(r.e, "Train"); p.Status != phaseapi.StatusOK || p.Reason != "" {
		t.Errorf("after the late end: %s %q, want ok", p.Status, p.Reason)
	}
}

// TestEndRetriedAfterARestartWinsOverTheCheck: the wrapper's end, tried
// again until serve is back, comes within the grace: the phase ends as
// the end says, with no death.
func TestEndRetriedAfterARestartWinsOverTheCheck(t *testing.T) {
	r := newRestartRig(t)
	r.restartAfterTheProcessEnded()
	r.checkFor(5 * time.Second)
	if _, err := r.e.Apply(phaseapi.HeartbeatRequest{Phase: "Train", Event: phaseapi.EventEnd, Status: phaseapi.StatusOK}); err != nil {
		t.Fatal(err)
	}
	r.checkFor(inheritedEndGrace)
	ends := r.e.Ends()
	if p, _ := findPhase(r.e, "Train"); p.Status != phaseapi.StatusOK || len(ends) != 1 || ends[0].Status != phaseapi.StatusOK || ends[0].Died {
		t.Errorf("phase %s, ends %+v; want the one ok end", p.Status, ends)
	}
}

// TestPhaseSeenAliveAfterARestartStillDies: a phase whose process the
// restarted serve saw alive, then gone with no end, died while watched:
// failed, "died without ending", after deadGrace as ever.
func TestPhaseSeenAliveAfterARestartStillDies(t *testing.T) {
	r := newRestartRig(t)
	r.e = r.server()
	r.checkFor(time.Second)
	r.procs.gone(4242)
	r.checkFor(3 * time.Second)
	p, _ := findPhase(r.e, "Train")
	if p.Status != phaseapi.StatusFailed || p.Reason != "died without ending (pid 4242 gone)" {
		t.Errorf("phase %s %q, want failed: died without ending", p.Status, p.Reason)
	}
}

// TestADeathComesBackAsADeath: a phase the server ended because its
// process died, then a crash of the server: the end the restarted server
// gives back says it died, as the first one's did, and so does an end
// whose outcome was unknown.
func TestADeathComesBackAsADeath(t *testing.T) {
	r := newRestartRig(t)
	r.e = r.server()
	r.checkFor(time.Second)
	r.procs.gone(4242)
	r.checkFor(3 * time.Second)
	before := r.e.Ends()
	if len(before) != 1 || !before[0].Died {
		t.Fatalf("ends before the crash: %+v, want the death", before)
	}
	r.clock.Advance(time.Second)
	r.e = r.server() // a crash: no Close
	after := r.e.Ends()
	if len(after) != 1 || !after[0].Died || after[0].Status != phaseapi.StatusFailed || after[0].Reason != before[0].Reason || after[0].PID != 4242 {
		t.Errorf("the end after the restart: %+v, want %+v renumbered", after, before[0])
	}

	unknown := newRestartRig(t)
	unknown.restartAfterTheProcessEnded()
	unknown.checkFor(20 * time.Second) // past the grace of a phase no one watched
	if ends := unknown.e.Ends(); len(ends) != 1 || ends[0].Status != phaseapi.StatusUnknown {
		t.Fatalf("ends of a phase that ended while no server watched: %+v", ends)
	}
	unknown.clock.Advance(time.Second)
	unknown.e = unknown.server()
	if ends := unknown.e.Ends(); len(ends) != 1 || !ends[0].Died || ends[0].Status != phaseapi.StatusUnknown {
		t.Errorf("the unknown end after the restart: %+v, want it died", ends)
	}
}
