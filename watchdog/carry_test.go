package watchdog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/gpu"
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
	rules, err := NewRules(RuleFlags{Interval: 5 * time.Second, Threshold: 0.5, Hysteresis: 0.05, Repeat: h, PressureThreshold: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	phase, err := NewPhaseRules(PhaseConfig{Notify: []string{"stalled"}, StallAfter: 10 * m, Repeat: h})
	if err != nil {
		t.Fatal(err)
	}
	return newCarryRigOf(t, now, carried, append(rules, phase...)...)
}

// newCarryRigOf is a carryRig of the given rules.
func newCarryRigOf(t *testing.T, now time.Time, carried []OpenIncident, rules ...Rule) *carryRig {
	t.Helper()
	r := &carryRig{t: t, pusher: &fakePusher{accept: true}, now: now}
	var err error
	r.wd, err = New(Config{
		Rules: rules, Push: r.pusher,
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

// pollIncidents is poll, each alert as "status rule incident began", the
// incident's NUL written as a space.
func (r *carryRig) pollIncidents(now time.Time, s Sample) string {
	r.now, r.next = now, s
	before := len(r.pusher.pushes)
	r.wd.Poll(context.Background())
	var got []string
	for _, push := range r.pusher.pushes[before:] {
		for _, a := range push {
			got = append(got, fmt.Sprintf("%s %s %s %s", a.Status, a.Rule, strings.ReplaceAll(a.Incident, "\x00", " "), a.Began.Sub(t0)))
		}
	}
	return strings.Join(got, "; ")
}

func newDiskCarryRig(t *testing.T, now time.Time, carried []OpenIncident) *carryRig {
	t.Helper()
	return newCarryRigOf(t, now, carried, newDiskRule(t, "10%"))
}

// TestDiskIncidentsCarryOverARestart: /data under its floor and /scratch
// unreadable, both pushed, then the process restarted. Still so: no push
// (the guard's new unreadable stretch starts at the restart, which is no
// new incident), and each resolution, when it comes, has the Began of its
// first push. Gone while down: both resolved at the first poll.
func TestDiskIncidentsCarryOverARestart(t *testing.T) {
	low := Disk{Path: "/data", SizeBytes: 64 * mib, AvailBytes: 4 * mib}
	free := Disk{Path: "/data", SizeBytes: 64 * mib, AvailBytes: 40 * mib}
	hung := func(since time.Time) Disk {
		return Disk{Path: "/scratch", Err: "statfs did not answer", ErrSince: since, Hung: true}
	}
	scratch := Disk{Path: "/scratch", SizeBytes: 64 * mib, AvailBytes: 40 * mib}

	first := newDiskCarryRig(t, t0, nil)
	if got := first.pollIncidents(t0, Sample{Disks: []Disk{low}, UnreadableDisks: []Disk{hung(t0)}}); got != "firing disk-space /data floor 0s" {
		t.Fatalf("first poll pushed %q", got)
	}
	if got := first.pollIncidents(t0.Add(m), Sample{Disks: []Disk{low}, UnreadableDisks: []Disk{hung(t0)}}); got != "firing disk-space /scratch unreadable 0s" {
		t.Fatalf("a minute later: %q", got)
	}
	if len(first.open) != 2 {
		t.Fatalf("open incidents %+v, want the floor and the unreadable path", first.open)
	}

	restart := t0.Add(10 * m)
	still := newDiskCarryRig(t, restart, first.open)
	for _, at := range []time.Time{restart, restart.Add(m), restart.Add(2 * m)} {
		if got := still.pollIncidents(at, Sample{Disks: []Disk{low}, UnreadableDisks: []Disk{hung(restart)}}); got != "" {
			t.Errorf("%s after the restart: pushed %q, want nothing: the phone knows", at.Sub(restart), got)
		}
	}
	if got := still.pollIncidents(restart.Add(3*m), Sample{Disks: []Disk{free, scratch}}); got != "resolved disk-space /data floor 0s; resolved disk-space /scratch unreadable 0s" {
		t.Errorf("at the end: %q, want both resolved with the Began of their first push", got)
	}
	if len(still.open) != 0 {
		t.Errorf("open incidents %+v after their end", still.open)
	}

	gone := newDiskCarryRig(t, restart, first.open)
	if got := gone.pollIncidents(restart, Sample{Disks: []Disk{free, scratch}}); got != "resolved disk-space /data floor 0s; resolved disk-space /scratch unreadable 0s" {
		t.Errorf("the first poll after the restart pushed %q, want both resolved", got)
	}
}

// A fill incident carried over: the guard learns the fill rate anew, and
// until it knows it the incident neither ends nor pushes again; once the
// rate says the disk lasts, it is resolved with its first push's Began.
func TestADiskFillIncidentWaitsForTheRateAfterARestart(t *testing.T) {
	eta := (10 * h).Seconds()
	phase := phaseapi.Phase{Name: "Pretrain", Status: phaseapi.StatusActive, Started: t0, LastHeartbeat: t0, Progress: phaseapi.Progress{ETASeconds: &eta}}
	filling := Disk{Path: "/data", SizeBytes: 64 * gi, AvailBytes: 8 * gi, FillRate: 1 * mib, RateSpan: 30 * m}
	unknown := filling
	unknown.FillRate, unknown.RateSpan = 0, 0
	slow := filling
	slow.FillRate = 1024

	first := newDiskCarryRig(t, t0, nil)
	if got := first.pollIncidents(t0, Sample{Disks: []Disk{filling}, Phases: []phaseapi.Phase{phase}}); got != "firing disk-space /data fill 0s" {
		t.Fatalf("first poll pushed %q", got)
	}
	restart := t0.Add(10 * m)
	next := newDiskCarryRig(t, restart, first.open)
	if got := next.pollIncidents(restart, Sample{Disks: []Disk{unknown}, Phases: []phaseapi.Phase{phase}}); got != "" {
		t.Errorf("rate unknown after the restart: pushed %q, want nothing", got)
	}
	if st := next.wd.State(); st[0].Armed || !st[0].Since.Equal(t0) {
		t.Errorf("state %+v, want the fill incident kept", st[0])
	}
	if got := next.pollIncidents(restart.Add(m), Sample{Disks: []Disk{filling}, Phases: []phaseapi.Phase{phase}}); got != "" {
		t.Errorf("still filling: pushed %q, want nothing", got)
	}
	if got := next.pollIncidents(restart.Add(2*m), Sample{Disks: []Disk{slow}, Phases: []phaseapi.Phase{phase}}); got != "resolved disk-space /data fill 0s" {
		t.Errorf("once it lasts: %q, want the resolution", got)
	}
}

// gpuHost is a 5-GPU host for the GPU rules' carry-over: GPU 0 serves the
// phase "A" (idle when idle), GPU 1 is lost when lost, GPU 2's row remap
// waits when remap, GPU 3 is in thermal slowdown when slowed, GPU 4 has
// ecc uncorrected errors.
func gpuHost(idle, lost, remap, slowed bool, ecc uint64) Sample {
	util := uint32(99)
	if idle {
		util = 0
	}
	var reasons gpu.ClockEventReasons
	if slowed {
		reasons = gpu.ReasonHWThermalSlowdown
	}
	p := phaseapi.Phase{Name: "A", Status: phaseapi.StatusActive, Started: t0, LastHeartbeat: t0}
	return Sample{Phases: []phaseapi.Phase{p}, PhaseGPUs: map[string][]int{"A": {0}}, GPUs: []gpu.Device{
		{Index: 0, BusID: "0000:18:00", Supported: gpu.FieldUtilization | gpu.FieldProcesses, SMUtil: util},
		{Index: 1, BusID: "0000:2a:00", Lost: lost, Supported: gpu.FieldProcesses},
		{Index: 2, BusID: "0000:3c:00", Supported: gpu.FieldRemappedRows, RemappedRows: gpu.RemappedRows{Pending: remap}},
		{Index: 3, BusID: "0000:4e:00", Supported: gpu.FieldClockEvents, ClockEventReasons: reasons},
		{Index: 4, BusID: "0000:60:00", Supported: gpu.FieldECC, ECCVolatileUncorrected: ecc, Err: errors.New("GetTemperature: unknown")},
	}}
}

func newGPUCarryRig(t *testing.T, now time.Time, carried []OpenIncident) *carryRig {
	t.Helper()
	cfg := DefaultGPUConfig
	cfg.Retry = 5 * time.Second
	rules, err := NewGPURules(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return newCarryRigOf(t, now, carried, rules...)
}

// TestGPUIncidentsCarryOverARestart: a lost GPU, a row remap, an ECC
// rise, a thermal slowdown and idle GPUs under a phase, all pushed, then
// the process restarted (its open incidents through JSON, as serve keeps
// them). NVML stuck at the restart, then the GPUs as bad as before: no
// push. Each resolution, when it comes, has its first push's Began and
// GPUs; the ECC incident ends a quiet --watchdog.repeat after the last
// rise the process before saw.
func TestGPUIncidentsCarryOverARestart(t *testing.T) {
	first := newGPUCarryRig(t, t0, nil)
	var got []string
	for _, step := range []struct {
		at time.Duration
		s  Sample
	}{
		{0, gpuHost(true, true, true, true, 2)},
		{5 * time.Second, gpuHost(true, true, true, true, 3)},
		{3 * m, gpuHost(true, true, true, true, 3)},
		{10 * m, gpuHost(true, true, true, true, 4)},
	} {
		if g := first.pollIncidents(t0.Add(step.at), step.s); g != "" {
			got = append(got, g)
		}
	}
	want := "firing gpu-lost 0000:2a:00 0s; firing gpu-remap 0000:3c:00 0s|firing gpu-ecc 0000:60:00 5s|firing gpu-slowdown  0s|firing gpu-idle A 0s"
	if g := strings.Join(got, "|"); g != want {
		t.Fatalf("first process pushed %q, want %q", g, want)
	}
	data, err := json.Marshal(first.open)
	if err != nil {
		t.Fatal(err)
	}
	var carried []OpenIncident
	if err := json.Unmarshal(data, &carried); err != nil {
		t.Fatalf("open incidents do not read back: %v\n%s", err, data)
	}
	if len(carried) != 5 {
		t.Fatalf("open incidents %s, want 5", data)
	}

	restart := t0.Add(12 * m)
	next := newGPUCarryRig(t, restart, carried)
	stuck := Sample{Phases: gpuHost(true, true, true, true, 4).Phases, GPUErr: &gpu.StuckError{Since: restart, For: 10 * time.Second, At: "gpu 1: GetPowerUsage"}}
	for i, step := range []struct {
		at   time.Duration
		s    Sample
		want string
	}{
		{0, stuck, ""}, // nothing read: every incident holds
		{5 * time.Second, gpuHost(true, true, true, true, 4), ""},
		{m, gpuHost(true, true, true, true, 4), ""},
		{8*m + 10*time.Second, gpuHost(true, true, true, true, 4), "resolved gpu-ecc 0000:60:00 5s"},
		{9 * m, gpuHost(false, false, false, false, 4), "resolved gpu-lost 0000:2a:00 0s; resolved gpu-remap 0000:3c:00 0s"},
		{10 * m, gpuHost(false, false, false, false, 4), "resolved gpu-idle A 0s; resolved gpu-slowdown  0s"},
	} {
		if g := next.pollIncidents(restart.Add(step.at), step.s); g != step.want {
			t.Errorf("step %d, %s after the restart: pushed %q, want %q", i, step.at, g, step.want)
		}
	}
	for _, push := range next.pusher.pushes {
		for _, a := range push {
			if a.Rule != RuleGPULost || a.Incident == GPUStuckIncident {
				continue
			}
			if len(a.GPU.Devices) != 1 || a.GPU.Devices[0].BusID != "0000:2a:00" {
				t.Errorf("the lost GPU's resolution says GPUs %+v, want its first push's", a.GPU.Devices)
			}
		}
	}
}

// NVML stuck for a minute, pushed, then the process restarted with NVML
// stuck still: the restarted pass has been stuck for less than
// GPUStuckAfter, which is no end and no new incident; the first pass that
// reads the GPUs resolves the first push.
func TestNVMLStuckCarriesOverARestart(t *testing.T) {
	stuck := func(since time.Time, d time.Duration) Sample {
		return Sample{GPUErr: &gpu.StuckError{Since: since, For: d, At: "gpu 1: GetPowerUsage"}}
	}
	first := newGPUCarryRig(t, t0, nil)
	if got := first.pollIncidents(t0.Add(m), stuck(t0, m)); got != "firing gpu-lost nvml 1m0s" {
		t.Fatalf("first process pushed %q", got)
	}
	restart := t0.Add(5 * m)
	next := newGPUCarryRig(t, restart, first.open)
	for _, d := range []time.Duration{0, 30 * time.Second, 2 * m} {
		if got := next.pollIncidents(restart.Add(d), stuck(restart, d)); got != "" {
			t.Errorf("stuck %s after the restart: pushed %q, want nothing", d, got)
		}
	}
	if got := next.pollIncidents(restart.Add(3*m), gpuHost(false, false, false, false, 0)); got != "resolved gpu-lost nvml 1m0s" {
		t.Errorf("NVML answering: pushed %q, want the first push resolved", got)
	}
}

func newKernelCarryRig(t *testing.T, now time.Time, carried []OpenIncident) *carryRig {
	t.Helper()
	rules, err := NewKernelRules(KernelConfig{Repeat: 10 * m, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return newCarryRigOf(t, now, carried, rules...)
}

// faults hands faults to the watchdog at now as the kernel log does, and
// returns what the event path pushed, as poll does.
func (r *carryRig) faults(now time.Time, faults ...KernelFault) string {
	r.now = now
	before := len(r.pusher.pushes)
	r.wd.Faults(faults)
	r.wd.pushEvents(context.Background())
	var got []string
	for _, push := range r.pusher.pushes[before:] {
		for _, a := range push {
			got = append(got, fmt.Sprintf("%s %s %d %s", a.Status, a.Rule, a.Repeats, a.Began.Sub(t0)))
		}
	}
	return strings.Join(got, "; ")
}

// kernelPoll is poll, each alert with its repeats.
func (r *carryRig) kernelPoll(now time.Time) string {
	r.now = now
	before := len(r.pusher.pushes)
	r.wd.Poll(context.Background())
	var got []string
	for _, push := range r.pusher.pushes[before:] {
		for _, a := range push {
			got = append(got, fmt.Sprintf("%s %s %d %s", a.Status, a.Rule, a.Repeats, a.Began.Sub(t0)))
		}
	}
	return strings.Join(got, "; ")
}

// TestKernelFaultsCarryOverARestart: Xid 79 pushed, repeated 3 times,
// then the process restarted within the window (its open incidents
// through JSON). A repeat after the restart is counted into the same
// incident, and the window's end pushes "again 4 times" with the first
// push's Began, not a new first push. Restarted instead after the window
// ended: the 3 repeats it held are told at the first poll; with none held
// nothing is pushed (kernel faults are never resolved), and the next
// record is a new incident.
func TestKernelFaultsCarryOverARestart(t *testing.T) {
	first := newKernelCarryRig(t, t0, nil)
	if got := first.faults(t0, xid79(1)); got != "firing gpu 0 0s" {
		t.Fatalf("first record pushed %q", got)
	}
	if len(first.open) != 1 || first.open[0].Fault == nil || !first.open[0].Delivered {
		t.Fatalf("open incidents %+v after the push, want the Xid, delivered", first.open)
	}
	pushedOnly := first.open
	for i := range 3 {
		if got := first.faults(t0.Add(m+time.Duration(i)*time.Second), xid79(uint64(100+i))); got != "" {
			t.Fatalf("repeat %d pushed %q", i, got)
		}
	}
	if got := first.kernelPoll(t0.Add(2 * m)); got != "" {
		t.Fatalf("poll in the window pushed %q", got)
	}
	data, err := json.Marshal(first.open)
	if err != nil {
		t.Fatal(err)
	}
	var carried []OpenIncident
	if err := json.Unmarshal(data, &carried); err != nil || len(carried) != 1 || carried[0].Repeats != 3 {
		t.Fatalf("open incidents %s (%v), want the Xid with 3 repeats", data, err)
	}

	within := newKernelCarryRig(t, t0.Add(5*m), carried)
	if got := within.kernelPoll(t0.Add(5 * m)); got != "" {
		t.Errorf("first poll after the restart pushed %q, want nothing: the window runs", got)
	}
	if got := within.faults(t0.Add(6*m), xid79(200)); got != "" {
		t.Errorf("a repeat after the restart pushed %q, want it counted", got)
	}
	if got := within.kernelPoll(t0.Add(10 * m)); got != "reminder gpu 4 0s" {
		t.Errorf("at the window's end: %q, want the 4 repeats told with the first push's Began", got)
	}

	after := newKernelCarryRig(t, t0.Add(30*m), carried)
	if got := after.kernelPoll(t0.Add(30 * m)); got != "reminder gpu 3 0s" {
		t.Errorf("window ended while down: %q, want the 3 repeats held told", got)
	}
	quiet := newKernelCarryRig(t, t0.Add(30*m), pushedOnly)
	if got := quiet.kernelPoll(t0.Add(30 * m)); got != "" {
		t.Errorf("window ended while down, nothing held: pushed %q, want nothing", got)
	}
	if got := quiet.faults(t0.Add(31*m), xid79(300)); got != "firing gpu 0 31m0s" {
		t.Errorf("the next record: %q, want a new incident", got)
	}
}

// An Xid whose push no phone took, carried over: the restarted watchdog
// tries it again at its first poll, as the same incident.
func TestAnUndeliveredKernelFaultIsRetriedAfterARestart(t *testing.T) {
	first := newKernelCarryRig(t, t0, nil)
	first.pusher.accept = false
	first.faults(t0, xid79(1))
	if len(first.open) != 1 || first.open[0].Delivered {
		t.Fatalf("open incidents %+v, want the Xid, undelivered", first.open)
	}
	next := newKernelCarryRig(t, t0.Add(m), first.open)
	if got := next.kernelPoll(t0.Add(m)); got != "firing gpu 0 0s" {
		t.Errorf("after the restart: %q, want the first push tried again with its Began", got)
	}
}

// A NaN loss pushed for an active phase, then the process restarted with
// the phase still active and its loss NaN: no second push. A new run of
// the phase that diverges is pushed as ever.
func TestALossPushCarriesOverARestart(t *testing.T) {
	newLossRig := func(now time.Time, carried []OpenIncident) *carryRig {
		rules, err := NewPhaseRules(PhaseConfig{Notify: []string{string(RuleLoss)}, StallAfter: 10 * m, Repeat: h})
		if err != nil {
			t.Fatal(err)
		}
		return newCarryRigOf(t, now, carried, rules...)
	}
	run := func(started time.Time) Sample {
		p := withLoss(phaseapi.Phase{Name: "Pretrain", Status: phaseapi.StatusActive, Started: started, LastHeartbeat: started}, math.NaN())
		return Sample{Phases: []phaseapi.Phase{p}}
	}
	first := newLossRig(t0, nil)
	if got := first.poll(t0, run(t0)); got != "firing loss 0s" {
		t.Fatalf("first poll pushed %q", got)
	}
	data, err := json.Marshal(first.open)
	if err != nil {
		t.Fatal(err)
	}
	var carried []OpenIncident
	if err := json.Unmarshal(data, &carried); err != nil || len(carried) != 1 {
		t.Fatalf("open incidents %s (%v), want the pushed run", data, err)
	}
	next := newLossRig(t0.Add(m), carried)
	if got := next.poll(t0.Add(m), run(t0)); got != "" {
		t.Errorf("the restart pushed %q, want nothing: the phone knows of this run's NaN", got)
	}
	if got := next.poll(t0.Add(2*m), run(t0.Add(2*m))); got != "firing loss 2m0s" {
		t.Errorf("a new run diverging: %q, want it pushed", got)
	}
}

// A failed end whose push no phone took carries over a restart: the
// restarted watchdog, whose phase server numbers its ends anew and holds
// none of the old ones, pushes it at its first poll as it was worded (the
// end, its reason, its count) and with the same Began, so the same
// notification id; once a phone took it, nothing is left to carry. An end
// that was delivered before the restart is not carried.
func TestAnUndeliveredPhaseEndCarriesOverARestart(t *testing.T) {
	newEndRig := func(now time.Time, carried []OpenIncident, accept bool) *carryRig {
		r := newPhaseEndRig(t, now, carried)
		r.pusher.accept = accept
		return r
	}
	failed := phaseapi.PhaseEnd{Seq: 1, Phase: "Pretrain", Status: phaseapi.StatusFailed, Reason: "RuntimeError: CUDA out of memory",
		Started: t0.Add(-2 * h), Ended: t0.Add(4 * time.Second), PID: 4242}

	first := newEndRig(t0, nil, false)
	first.poll(t0, Sample{}) // the baseline
	if got := first.poll(t0.Add(5*time.Second), Sample{Ends: []phaseapi.PhaseEnd{failed}}); got != "firing failed 4s" {
		t.Fatalf("the failed end pushed %q", got)
	}
	data, err := json.Marshal(first.open)
	if err != nil {
		t.Fatal(err)
	}
	var carried []OpenIncident
	if err := json.Unmarshal(data, &carried); err != nil || len(endsOf(carried)) != 1 {
		t.Fatalf("open incidents %s (%v), want the undelivered end", data, err)
	}

	next := newEndRig(t0.Add(m), carried, true)
	if got := next.poll(t0.Add(m), Sample{}); got != "firing failed 4s" {
		t.Fatalf("the restart's first poll pushed %q, want the undelivered end", got)
	}
	a := next.pusher.pushes[len(next.pusher.pushes)-1][0]
	if a.Phase != "Pretrain" || a.Incident != "Pretrain" || a.End.Reason != failed.Reason || a.Ends != 1 || a.PhaseDuration() != 2*h+4*time.Second || !a.At.Equal(t0.Add(5*time.Second)) {
		t.Errorf("the carried push: %+v", a)
	}
	if len(endsOf(next.open)) != 0 {
		t.Errorf("left to carry after a phone took it: %+v", next.open)
	}
	if got := next.poll(t0.Add(2*m), Sample{}); got != "" {
		t.Errorf("pushed again: %q", got)
	}

	// Delivered before the restart: nothing to carry.
	third := newEndRig(t0, nil, true)
	third.poll(t0, Sample{})
	third.poll(t0.Add(5*time.Second), Sample{Ends: []phaseapi.PhaseEnd{failed}})
	if len(endsOf(third.open)) != 0 {
		t.Errorf("a delivered end left to carry: %+v", third.open)
	}
}

// newPhaseEndRig is a carryRig of the failed and done rules alone.
func newPhaseEndRig(t *testing.T, now time.Time, carried []OpenIncident) *carryRig {
	t.Helper()
	rules, err := NewPhaseRules(PhaseConfig{Notify: []string{string(RuleFailed), string(RuleDone)}, Repeat: h, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return newCarryRigOf(t, now, carried, rules...)
}

// endsOf is the undelivered phase-end pushes among open incidents.
func endsOf(open []OpenIncident) []OpenIncident {
	var out []OpenIncident
	for _, o := range open {
		if o.End != nil {
			out = append(out, o)
		}
	}
	return out
}

// A serve killed (kill -9) after the phase server took an end and saved
// it, before the watchdog's next poll read it: the restarted phase server
// gives the ended phases of its saved table back as ends, numbered anew,
// and the failed and done rules, which carried how far they had read,
// push the ones past it, and only those. A rule that carried nothing (a
// state from before this was kept) takes them all as old news.
func TestEndsUnreadAtAKillArePushedAfterTheRestart(t *testing.T) {
	newEndRig := func(now time.Time, carried []OpenIncident) *carryRig { return newPhaseEndRig(t, now, carried) }
	pushed := phaseapi.PhaseEnd{Seq: 1, Phase: "Pretrain", Status: phaseapi.StatusOK, Started: t0.Add(-2 * h), Ended: t0.Add(2 * time.Second)}
	first := newEndRig(t0, nil)
	first.poll(t0, Sample{}) // the baseline
	if got := first.poll(t0.Add(40*time.Second), Sample{Ends: []phaseapi.PhaseEnd{pushed}}); got != "firing done 2s" {
		t.Fatalf("the ok end pushed %q", got)
	}
	data, err := json.Marshal(first.open)
	if err != nil {
		t.Fatal(err)
	}
	var carried []OpenIncident
	if err := json.Unmarshal(data, &carried); err != nil {
		t.Fatal(err)
	}
	// Killed after the phase server took SFT's failure, before a poll.
	unread := phaseapi.PhaseEnd{Seq: 2, Phase: "SFT", Status: phaseapi.StatusFailed, Reason: "RuntimeError: CUDA out of memory",
		Started: t0.Add(50 * time.Second), Ended: t0.Add(m)}
	restored := []phaseapi.PhaseEnd{pushed, unread}
	restored[0].Seq, restored[1].Seq = 1, 2 // the restarted server's numbers

	next := newEndRig(t0.Add(2*m), carried)
	if got := next.poll(t0.Add(2*m), Sample{Ends: restored}); got != "firing failed 1m0s" {
		t.Errorf("the restart's first poll pushed %q, want SFT's failure alone", got)
	}
	if got := next.poll(t0.Add(3*m), Sample{Ends: restored}); got != "" {
		t.Errorf("pushed again: %q", got)
	}

	var incidentsOnly []OpenIncident
	for _, o := range carried {
		if o.End != nil || o.Incident != "" {
			incidentsOnly = append(incidentsOnly, o)
		}
	}
	old := newEndRig(t0.Add(2*m), incidentsOnly)
	if got := old.poll(t0.Add(2*m), Sample{Ends: restored}); got != "" {
		t.Errorf("without how far it had read, the restart pushed %q; want the ends taken as old news", got)
	}
}
