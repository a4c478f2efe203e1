package watchdog

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// carryRig is one process's watchdog, swap, pressure and stall rules on,
// whose open incidents a test hands to the next process's.
type carryRig struct {
	t      *testing.T
	wd     *Watchdog
	pusher *fakePusher
	now    time.Time
	next   Sample
	open   []OpenIncident // what OnOpen last learned
	told   int            // how many times it learned
}

func newCarryRig(t *testing.T, now time.Time, carried []OpenIncident) *carryRig {
	t.Helper()
	r := &carryRig{t: t, pusher: &fakePusher{accept: true}, now: now}
	rules, err := NewRules(RuleFlags{Interval: 5 * time.Second, Threshold: 0.5, Hysteresis: 0.05, Repeat: h, PressureThreshold: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	phase, err := NewPhaseRules(PhaseConfig{Notify: []string{"stalled"}, StallAfter: 10 * m, Repeat: h})
	if err != nil {
		t.Fatal(err)
	}
	r.wd, err = New(Config{
		Rules: append(rules, phase...), Push: r.pusher,
		Read:   func(context.Context) (Sample, error) { return r.next, nil },
		Now:    func() time.Time { return r.now },
		OnOpen: func(o []OpenIncident) { r.open, r.told = o, r.told+1 },
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.wd.Restore(carried); n != len(carried) {
		t.Fatalf("restored %d of %d incidents", n, len(carried))
	}
	return r
}

// poll polls at now and returns what it pushed, one "status rule began" a
// line.
func (r *carryRig) poll(now time.Time, s Sample) string {
	r.now, r.next = now, s
	before := len(r.pusher.pushes)
	r.wd.Poll(context.Background())
	var got []string
	for _, push := range r.pusher.pushes[before:] {
		for _, a := range push {
			got = append(got, fmt.Sprintf("%s %s %s", a.Status, a.Rule, a.Began.Sub(t0)))
		}
	}
	return strings.Join(got, "; ")
}

func hostAt(swap, pressure float64, phases ...phaseapi.Phase) Sample {
	return Sample{Swap: swapOf(swap), Pressure: Pressure{Available: true, Some: pressure}, Phases: phases}
}

// TestOpenIncidentsCarryOverARestart: swap and pressure pushed, then the
// process restarted, given what OnOpen learned. Still there: the same
// incidents (same Began, hence the same notification), no new push, the
// reminder when it was due. Gone by the first poll: resolved, with the
// Began of the first push.
func TestOpenIncidentsCarryOverARestart(t *testing.T) {
	first := newCarryRig(t, t0, nil)
	if got := first.poll(t0, hostAt(0.54, 0.23)); got != "firing swap 0s; firing pressure 0s" {
		t.Fatalf("first poll pushed %q", got)
	}
	if len(first.open) != 2 || !first.open[0].Delivered || first.open[0].Rule != RuleSwap || first.open[1].Rule != RulePressure {
		t.Fatalf("open incidents %+v, want swap and pressure, delivered", first.open)
	}
	told := first.told
	first.poll(t0.Add(5*time.Second), hostAt(0.54, 0.23))
	if first.told != told {
		t.Errorf("OnOpen learned again after a poll that changed nothing")
	}

	// Restarted 10 minutes later, swap and pressure still high.
	still := newCarryRig(t, t0.Add(10*m), first.open)
	if got := still.poll(t0.Add(10*m), hostAt(0.54, 0.23)); got != "" {
		t.Errorf("the restart pushed %q, want nothing: the phone knows", got)
	}
	if got := still.poll(t0.Add(h), hostAt(0.54, 0.23)); got != "reminder swap 0s; reminder pressure 0s" {
		t.Errorf("at the reminder: %q, want both reminded, with the Began of the first push", got)
	}
	if got := still.poll(t0.Add(h+5*time.Second), hostAt(0.20, 0.01)); got != "resolved swap 0s; resolved pressure 0s" {
		t.Errorf("at the end: %q, want both resolved, with the Began of the first push", got)
	}
	if len(still.open) != 0 {
		t.Errorf("open incidents %+v after their end, want none", still.open)
	}

	// Restarted after swap and pressure fell while nothing watched.
	gone := newCarryRig(t, t0.Add(10*m), first.open)
	if got := gone.poll(t0.Add(10*m), hostAt(0.20, 0.01)); got != "resolved swap 0s; resolved pressure 0s" {
		t.Errorf("the first poll after the restart pushed %q, want both resolved", got)
	}
	if gone.told == 0 || len(gone.open) != 0 {
		t.Errorf("OnOpen learned %+v (%d times), want the incidents closed", gone.open, gone.told)
	}
}

// A push no phone took, carried over: the restarted watchdog tries it
// again at once, as the same incident.
func TestAnUndeliveredIncidentIsRetriedAfterARestart(t *testing.T) {
	first := newCarryRig(t, t0, nil)
	first.pusher.accept = false
	first.poll(t0, hostAt(0.54, 0))
	if len(first.open) != 1 || first.open[0].Delivered {
		t.Fatalf("open incidents %+v, want swap, undelivered", first.open)
	}
	next := newCarryRig(t, t0.Add(time.Minute), first.open)
	if got := next.poll(t0.Add(time.Minute), hostAt(0.54, 0)); got != "firing swap 0s" {
		t.Errorf("after the restart: %q, want the first push tried again with its Began", got)
	}
}

// A stall pushed, then the process restarted 10 s later: no second push;
// the reminder at its time; a heartbeat ends it silently.
func TestAStallCarriesOverARestart(t *testing.T) {
	silent := phaseapi.Phase{Name: "Pretrain", Status: phaseapi.StatusActive, Started: t0, LastHeartbeat: t0}
	first := newCarryRig(t, t0, nil)
	first.poll(t0, hostAt(0.1, 0, silent))
	if got := first.poll(t0.Add(11*m), hostAt(0.1, 0, silent)); got != "firing stalled 0s" {
		t.Fatalf("stall pushed %q", got)
	}
	resumed := Sample{Swap: swapOf(0.1), Phases: []phaseapi.Phase{silent}, Run: phaseapi.Run{File: "run.log", Resumed: t0.Add(11*m + 10*time.Second)}}
	next := newCarryRig(t, t0.Add(11*m+10*time.Second), first.open)
	if got := next.poll(t0.Add(11*m+10*time.Second), resumed); got != "" {
		t.Errorf("the restart pushed %q, want nothing: the phone knows of the stall", got)
	}
	if got := next.poll(t0.Add(h+11*m), resumed); got != "reminder stalled 0s" {
		t.Errorf("at the reminder: %q, want the stall reminded, with the Began of its first push", got)
	}
	pinged := silent
	pinged.LastHeartbeat = t0.Add(h + 12*m)
	resumed.Phases = []phaseapi.Phase{pinged}
	if got := next.poll(t0.Add(h+12*m), resumed); got != "" || len(next.open) != 0 {
		t.Errorf("a heartbeat: pushed %q, open %+v; want the stall over, silently", got, next.open)
	}
}
