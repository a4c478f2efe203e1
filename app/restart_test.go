package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/watchdog"
)

// restartRig runs RunServe in the test process on a fake procfs, with one
// target on a Bark stand-in, and runs it again on the same logs dir, Bark
// config and Bark server with --run.resume: a supervisor's restart.
type restartRig struct {
	t               *testing.T
	procfs          *testkit.Procfs
	bark            *barktest.Server
	barkDir, logDir string
	clock           func() time.Time // nil: time.Now
	interval        time.Duration    // --watchdog.interval
	repeat          time.Duration    // --watchdog.repeat
	kmsg            string           // --path.kmsg; "": none
	diskPaths       []string         // --disk.path
	minFree         watchdog.MinFree // --watchdog.disk-min-free
}

func newRestartRig(t *testing.T, procfs *testkit.Procfs, clock func() time.Time, interval time.Duration) *restartRig {
	b := barktest.New(t)
	return &restartRig{t: t, procfs: procfs, bark: b, logDir: t.TempDir(), clock: clock, interval: interval, repeat: time.Hour,
		barkDir: barktest.ConfigDir(t, map[string]string{"phone.bark.env": b.Template(barktest.Key) + "\n"})}
}

// options are serve's with the flags' defaults where the rig sets nothing.
func (r *restartRig) options() ServeOptions {
	rules := watchdog.DefaultRuleFlags
	rules.Interval, rules.Repeat, rules.GPU = r.interval, r.repeat, false
	return ServeOptions{
		Web:    WebOptions{ListenAddresses: []string{"127.0.0.1:0"}, WriteAllow: []string{"host"}},
		Runlog: RunlogOptions{Dir: r.logDir},
		Host:   HostOptions{ProcFS: r.procfs.Dir, HistoryStep: 10 * time.Second, KmsgPath: r.kmsg, DiskPaths: r.diskPaths},
		Push: PushOptions{
			Delivery: delivery.Config{ConfigDir: r.barkDir, Timeout: 2 * time.Second, MaxPerMinute: delivery.DefaultMaxPerMinute},
		},
		Watchdog: WatchdogOptions{
			Interval: r.interval,
			Rules:    rules,
			Phase:    watchdog.PhaseConfig{StallAfter: watchdog.DefaultStallAfter, Repeat: r.repeat, Retry: r.interval},
			Disk:     watchdog.DiskConfig{MinFree: r.minFree, Repeat: r.repeat, Retry: r.interval},
		},
		RunResume: true,
	}
}

// served is one run of serve.
type served struct {
	t    *testing.T
	base string
	logs *testkit.SyncBuffer
	stop func() error // a graceful stop (SIGTERM); its error
}

// start runs serve and returns once it is ready (its first poll done).
func (r *restartRig) start() *served {
	r.t.Helper()
	s := &served{t: r.t, logs: &testkit.SyncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan []net.Addr, 1)
	ready := make(chan struct{})
	done := make(chan error, 1)
	env := Env{
		Logger:   slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:    r.clock,
		OnListen: func(a []net.Addr) { addrs <- a },
		OnReady:  func() { close(ready) },
	}
	go func() { done <- RunServe(ctx, r.options(), env) }()
	select {
	case a := <-addrs:
		s.base = "http://" + a[0].String()
	case err := <-done:
		cancel()
		r.t.Fatalf("serve stopped before listening: %v\n%s", err, s.logs)
	}
	select {
	case <-ready:
	case err := <-done:
		cancel()
		r.t.Fatalf("serve stopped before ready: %v\n%s", err, s.logs)
	}
	stopped := false
	var stopErr error
	s.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = errors.New("serve did not stop within 30s")
			}
		}
		return stopErr
	}
	r.t.Cleanup(func() {
		if err := s.stop(); err != nil {
			r.t.Errorf("serve: %v", err)
		}
	})
	return s
}

// waitPolls waits until the watchdog has polled n more times.
func (s *served) waitPolls(n int) {
	s.t.Helper()
	polls := func() float64 {
		return testkit.Scrape(s.t, nil, s.base+"/metrics").MustValue(s.t, "lavender_watchdog_polls_total", nil)
	}
	target := polls() + float64(n)
	testkit.WaitFor(s.t, 20*time.Second, func() bool { return polls() >= target }, fmt.Sprintf("%d more watchdog polls", n))
}

// heartbeat posts one heartbeat body and wants it accepted.
func (s *served) heartbeat(body string) {
	s.t.Helper()
	if code, answer := testkit.MustDo(s.t, nil, "POST", s.base+"/api/v1/heartbeat", []byte(body), "", ""); code != 200 {
		s.t.Fatalf("%s: %d %s", body, code, answer)
	}
}

// pushes are what Bark received, each as "id: body".
func (r *restartRig) pushes() []string {
	var out []string
	for _, p := range r.bark.Pushes() {
		u, err := url.Parse(p.RequestURI)
		if err != nil {
			r.t.Fatal(err)
		}
		out = append(out, u.Query().Get("id")+": "+p.Body)
	}
	return out
}

// serve down 12 minutes (a restart loop, a long upgrade) while the training
// pinged into refused connections: the restarted serve counts no stall
// from before its start, and pushes nothing at its first polls.
func TestRestartCountsNoDowntimeAsAStall(t *testing.T) {
	clock, rig, a := startWithAPhase(t)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(12 * time.Minute)
	b := rig.start()
	b.waitPolls(3)
	if got := rig.pushes(); len(got) != 0 {
		t.Fatalf("pushes %q at the restart, before the phase could ping the new serve", got)
	}
	clock.Advance(watchdog.DefaultStallAfter)
	b.waitPolls(3)
	if got := rig.pushes(); len(got) != 1 {
		t.Errorf("pushes %q, want the stall once the silence heard lasted --phase.stall-after", got)
	}
}

// A phase's end accepted (200) just before a graceful stop, before the next
// poll and within its settle time: the stop pushes it, and the restarted
// serve, which takes the ends it finds as old news, pushes nothing more.
func TestStopPushesTheEndsAcceptedBeforeIt(t *testing.T) {
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.10)})
	rig := newRestartRig(t, procfs, nil, time.Hour) // no poll but the first and the last
	a := rig.start()
	a.heartbeat(`{"phase":"Pretrain","event":"start"}`)
	a.heartbeat(`{"phase":"Pretrain","event":"end","status":"failed","reason":"RuntimeError: CUDA out of memory"}`)
	a.heartbeat(`{"phase":"Eval","event":"start"}`)
	a.heartbeat(`{"phase":"Eval","event":"end"}`) // ok: held 30 s for a failure after it
	a.heartbeat(`{"phase":"Export","event":"start"}`)
	a.heartbeat(`{"phase":"Export","event":"end","status":"failed","reason":"terminated by SIGTERM"}`) // outside: held for its cause
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rig.pushes(), "\n")
	for _, want := range []string{`"Pretrain" failed`, `"Eval" done`, `"Export" failed`} {
		if !strings.Contains(got, want) {
			t.Errorf("pushes at the stop:\n%s\nwant one with %s", got, want)
		}
	}
	before := len(rig.pushes())
	b := rig.start()
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	if after := rig.pushes(); len(after) != before {
		t.Errorf("the restart pushed again: %q", after[before:])
	}
}

// ids are the notification ids of the pushes.
func (r *restartRig) ids() []string {
	var out []string
	for _, p := range r.pushes() {
		id, _, _ := strings.Cut(p, ": ")
		out = append(out, id)
	}
	return out
}

// Swap at 54 % pushed, serve restarted, swap still at 54 %: the same
// incident goes on (no second push), and its resolution replaces the first
// notification.
func TestRestartKeepsAnOpenIncident(t *testing.T) {
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.54)})
	rig := newRestartRig(t, procfs, nil, 20*time.Millisecond)
	b := rig.restartAfterTheFirstPush()
	procfs.SetSwap(testkit.SwapAt(testkit.Swap32GiBinKB, 0.20))
	testkit.WaitFor(t, 20*time.Second, func() bool { return rig.bark.Count() >= 2 }, "the resolution")
	b.waitPolls(5)
	got, ids := rig.pushes(), rig.ids()
	if len(got) != 2 || !strings.Contains(got[1], "resolved: swap") || ids[0] != ids[1] {
		t.Errorf("pushes %q, want the swap push and its resolution, with one id", got)
	}
}

// Swap pushed, then freed while serve was down: the first poll after the
// restart resolves the notification.
func TestRestartResolvesAnIncidentThatEndedWhileDown(t *testing.T) {
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.54)})
	rig := newRestartRig(t, procfs, nil, 20*time.Millisecond)
	a := rig.start()
	rig.bark.WaitPushes(t, 1)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	procfs.SetSwap(testkit.SwapAt(testkit.Swap32GiBinKB, 0.20))
	b := rig.start() // its first poll is done
	b.waitPolls(5)
	got, ids := rig.pushes(), rig.ids()
	if len(got) != 2 || !strings.Contains(got[1], "resolved: swap 20% full") || ids[0] != ids[1] {
		t.Errorf("pushes %q, want the swap push and its resolution, with one id", got)
	}
}

// A stall pushed, then serve restarted 10 s later: the stall is not pushed
// again before its reminder.
func TestRestartDoesNotPushAStallAgain(t *testing.T) {
	clock, rig, a := startWithAPhase(t)
	clock.Advance(11 * time.Minute)
	rig.bark.WaitPushes(t, 1)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	b := rig.start()
	b.waitPolls(3)
	clock.Advance(watchdog.DefaultStallAfter) // a stall counted afresh from the restart would push now
	b.waitPolls(3)
	if got := rig.pushes(); len(got) != 1 {
		t.Fatalf("pushes %q, want the stall once: its reminder is due in an hour", got)
	}
	clock.Advance(time.Hour)
	testkit.WaitFor(t, 20*time.Second, func() bool { return rig.bark.Count() >= 2 }, "the reminder")
	if got, ids := rig.pushes(), rig.ids(); len(got) != 2 || ids[0] != ids[1] {
		t.Errorf("pushes %q, want the stall and its reminder, with one id", got)
	}
}

// A damaged watchdog state file is moved aside and logged; serve runs.
func TestDamagedWatchdogStateIsMovedAside(t *testing.T) {
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.54)})
	rig := newRestartRig(t, procfs, nil, 20*time.Millisecond)
	path := filepath.Join(rig.logDir, WatchdogStateFileName)
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := rig.start()
	rig.bark.WaitPushes(t, 1)
	if !strings.Contains(s.logs.String(), "watchdog state damaged") {
		t.Errorf("nothing logged of the damaged file:\n%s", s.logs)
	}
	if data, err := os.ReadFile(path + ".damaged"); err != nil || string(data) != "{not json" {
		t.Errorf("the damaged file was not kept aside: %q, %v", data, err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		data, _ := os.ReadFile(path)
		return strings.Contains(string(data), `"rule": "swap"`)
	}, "the swap incident saved")
}

// startWithAPhase starts serve on a hand-moved clock, polling every 20 ms
// with swap low, and starts the phase "Pretrain" on it.
func startWithAPhase(t *testing.T) (*testkit.Clock, *restartRig, *served) {
	t.Helper()
	clock := testkit.NewClock(time.Now())
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.10)})
	rig := newRestartRig(t, procfs, clock.Now, 20*time.Millisecond)
	a := rig.start()
	a.heartbeat(`{"phase":"Pretrain","event":"start"}`)
	a.waitPolls(2)
	return clock, rig, a
}

// A disk under its floor pushed, serve restarted with the disk still so:
// no second push. Restarted again with the floor lowered under what is
// free: the first poll resolves the first notification.
func TestRestartKeepsADiskIncident(t *testing.T) {
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.10)})
	rig := newRestartRig(t, procfs, nil, 20*time.Millisecond)
	floor, err := watchdog.ParseMinFree("1000TB")
	if err != nil {
		t.Fatal(err)
	}
	rig.diskPaths, rig.minFree = []string{t.TempDir()}, floor
	b := rig.restartAfterTheFirstPush()
	if got := rig.pushes(); len(got) != 1 {
		t.Fatalf("pushes %q, want the disk's once: the phone knows", got)
	}
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	rig.minFree = watchdog.MinFree{}
	c := rig.start()
	c.waitPolls(5)
	got, ids := rig.pushes(), rig.ids()
	if len(got) != 2 || !strings.Contains(got[1], "resolved") || ids[0] != ids[1] {
		t.Errorf("pushes %q, want the disk's push and its resolution, with one id", got)
	}
}

// restartAfterTheFirstPush starts serve, stops it once the phone got a
// push, starts it again and waits for five of its polls.
func (r *restartRig) restartAfterTheFirstPush() *served {
	r.t.Helper()
	a := r.start()
	r.bark.WaitPushes(r.t, 1)
	if err := a.stop(); err != nil {
		r.t.Fatal(err)
	}
	b := r.start()
	b.waitPolls(5)
	return b
}

// A phase failed while Bark was down, and serve was restarted before a
// push got through: the failed end is saved with the open incidents at the
// stop, and the restarted serve pushes it at its first poll, worded as
// before and under the same notification id. Once it got through, a
// further restart pushes nothing.
func TestRestartPushesAnEndNoPhoneTook(t *testing.T) {
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.10)})
	rig := newRestartRig(t, procfs, nil, time.Hour) // no poll but the first and the last
	a := rig.start()
	rig.bark.SetFault(barktest.Status(503, "down"))
	a.heartbeat(`{"phase":"Pretrain","event":"start"}`)
	a.heartbeat(`{"phase":"Pretrain","event":"end","status":"failed","reason":"RuntimeError: CUDA out of memory"}`)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	tries := rig.pushes()
	if len(tries) == 0 || !strings.Contains(tries[0], `"Pretrain" failed`) {
		t.Fatalf("tries while Bark was down: %q", tries)
	}
	state, err := os.ReadFile(filepath.Join(rig.logDir, WatchdogStateFileName))
	if err != nil || !strings.Contains(string(state), `"rule": "failed"`) {
		t.Fatalf("the undelivered end is not in the watchdog state (%v):\n%s", err, state)
	}

	rig.bark.SetFault(nil)
	b := rig.start()
	got := rig.bark.WaitPushes(t, len(tries)+1)
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	pushes, ids := rig.pushes(), rig.ids()
	if len(got) != len(tries)+1 || len(pushes) != len(tries)+1 {
		t.Fatalf("pushes after the restart: %q, want the failed end once", pushes[len(tries):])
	}
	last := pushes[len(pushes)-1]
	if !strings.Contains(last, `"Pretrain" failed`) || !strings.Contains(last, "CUDA out of memory") || ids[len(ids)-1] != ids[0] {
		t.Errorf("the push after the restart %q, want the failed end under the id %s", last, ids[0])
	}

	c := rig.start()
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	if after := rig.pushes(); len(after) != len(pushes) {
		t.Errorf("pushed again after it got through: %q", after[len(pushes):])
	}
}
