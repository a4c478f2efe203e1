package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/watchdog"
)

// newFakeClock is serve's clock in the phase tests: heartbeats are stamped,
// and the watchdog polls, at whatever time the test has advanced it to, so
// a 10-minute stall takes no time.
func newFakeClock() *testkit.Clock { return testkit.NewClock(time.Now()) }

// startPhaseServe is `lavender serve` on the test's clock, with a quiet
// host (swap 26 %, no PSI, no OOM kill), the watchdog polling every 20ms
// and reminding every hour. logDir "" is a new run-log dir.
func startPhaseServe(t *testing.T, clock *testkit.Clock, logDir string, args ...string) *watchdogRig {
	t.Helper()
	host := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.26)})
	r := startServeOpts(t, host, serveOpts{logDir: logDir, clock: clock.Now},
		append([]string{"--watchdog.interval=20ms", "--watchdog.repeat=1h"}, args...)...)
	return &watchdogRig{serveRig: r, host: host}
}

// beat posts one heartbeat, e.g. `"event":"ping","step":1200`, for phase.
func (r *watchdogRig) beat(phase, fields string) {
	r.t.Helper()
	body := fmt.Sprintf(`{"phase":%q,%s}`, phase, fields)
	if code, answer := testkit.MustDo(r.t, nil, "POST", r.base+"/api/v1/heartbeat", []byte(body), "", ""); code != 200 {
		r.t.Fatalf("heartbeat %s answered %d %s", body, code, answer)
	}
}

// wantPushes waits for the pushes and run-log lines of want, then for a
// few more polls, and checks that nothing else came.
func (r *watchdogRig) wantPushes(want, wantLines []string) {
	r.t.Helper()
	if len(want) > 0 {
		r.bark.WaitPushes(r.t, len(want))
	}
	r.waitPolls(3)
	if got := r.pushes(); !slices.Equal(got, want) {
		r.t.Fatalf("pushes\n%q\nwant\n%q", got, want)
	}
	if got := r.barkLines(); !slices.Equal(got, wantLines) {
		r.t.Fatalf("run log BARK lines\n%q\nwant\n%q", got, wantLines)
	}
}

const (
	pretrainFailed = `[lavender-2] phase "Pretrain 1/3" failed after 4h12m`
	failedLine     = "BARK failed Pretrain 1/3 sent ok=1 fail=0"
	stalledLine    = "BARK stalled Pretrain 1/3 sent ok=1 fail=0"
)

// TestServePhaseFailed: a phase that ends failed pushes once, with its
// duration; so does `phase run` whose command exits 1.
func TestServePhaseFailed(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	// No stall push for the 4 silent hours: --phase.stall-after=0.
	r := startPhaseServe(t, clock, "", "--phase.stall-after=0")
	r.beat("Pretrain 1/3", `"event":"start"`)
	r.waitPolls(2)
	clock.Advance(4*time.Hour + 12*time.Minute + 7*time.Second)
	r.beat("Pretrain 1/3", `"event":"end","status":"failed"`)
	r.wantPushes([]string{pretrainFailed}, []string{failedLine})

	var stdout, stderr testkit.SyncBuffer
	cli := parseCLI(t, "phase", "run", "Eval", "--url", r.base, "--", "sh", "-c", "exit 1")
	if code, err := cli.Phase.Run.run(context.Background(), testGlobals(&stdout, &stderr), strings.NewReader(""), nil); code != 1 || err != nil {
		t.Fatalf("phase run = %d, %v; want the child's 1", code, err)
	}
	r.wantPushes([]string{pretrainFailed, `[lavender-2] phase "Eval" failed after 0s: exit code 1`},
		[]string{failedLine, "BARK failed Eval sent ok=1 fail=0"})
	if v := r.metric("lavender_watchdog_rule_armed", testkit.Labels{"rule": "failed"}); v != 1 {
		t.Errorf("failed rule armed = %v after its pushes were delivered", v)
	}
}

// TestServePhaseStalled: an active phase without a heartbeat for 10m
// pushes once, reminds every --watchdog.repeat, and re-arms when a
// heartbeat comes: the next silence pushes again.
func TestServePhaseStalled(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := startPhaseServe(t, clock, "")
	r.beat("Pretrain 1/3", `"event":"start"`)
	clock.Advance(10*time.Minute - time.Second)
	r.wantPushes(nil, nil)

	clock.Advance(time.Second)
	const stalled = `[lavender-2] phase "Pretrain 1/3" stalled: no heartbeat for 10m`
	r.wantPushes([]string{stalled}, []string{stalledLine})
	if v := r.metric("lavender_watchdog_rule_armed", testkit.Labels{"rule": "stalled"}); v != 0 {
		t.Errorf("stalled rule armed = %v during the stall", v)
	}

	clock.Advance(time.Hour) // --watchdog.repeat
	reminder := `[lavender-2] phase "Pretrain 1/3" stalled: no heartbeat for 1h10m`
	r.wantPushes([]string{stalled, reminder}, []string{stalledLine, stalledLine})

	r.beat("Pretrain 1/3", `"event":"ping"`)
	r.waitPolls(3)
	if v := r.metric("lavender_watchdog_rule_armed", testkit.Labels{"rule": "stalled"}); v != 1 {
		t.Errorf("stalled rule armed = %v once heartbeats resumed", v)
	}
	clock.Advance(10 * time.Minute)
	r.wantPushes([]string{stalled, reminder, stalled}, []string{stalledLine, stalledLine, stalledLine})
}

// TestServePhaseStepStalled: a phase that pings on while its step does not
// move for 10m pushes with its step and total, and re-arms once the step
// moves.
func TestServePhaseStepStalled(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := startPhaseServe(t, clock, "")
	r.beat("Pretrain 1/3", `"event":"start","step":0,"total":5000`)
	clock.Advance(time.Minute)
	r.beat("Pretrain 1/3", `"event":"ping","step":1200`)
	// Pings every 2 minutes, on the same step: never silent for 10m.
	for range 4 {
		clock.Advance(2 * time.Minute)
		r.beat("Pretrain 1/3", `"event":"ping","step":1200`)
	}
	clock.Advance(time.Minute + 59*time.Second)
	r.wantPushes(nil, nil)
	clock.Advance(time.Second)
	first := `[lavender-2] phase "Pretrain 1/3" stalled: step 1200/5000 for 10m`
	r.wantPushes([]string{first}, []string{stalledLine})

	r.beat("Pretrain 1/3", `"event":"ping","step":1300`)
	r.waitPolls(3)
	for range 2 {
		clock.Advance(5 * time.Minute)
		r.beat("Pretrain 1/3", `"event":"ping","step":1300`)
	}
	second := `[lavender-2] phase "Pretrain 1/3" stalled: step 1300/5000 for 10m`
	r.wantPushes([]string{first, second}, []string{stalledLine, stalledLine})
}

// TestServePhaseDone: a phase that ends ok pushes "done in" by default and
// whenever --phase.notify includes done, and nothing when it leaves it out.
func TestServePhaseDone(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		notify []string
		want   []string
		lines  []string
	}{
		{nil, []string{`[lavender-2] phase "Pretrain 1/3" done in 4h12m`}, []string{"BARK done Pretrain 1/3 sent ok=1 fail=0"}},
		{[]string{"--phase.notify=failed,stalled,loss"}, nil, nil},
		{[]string{"--phase.notify=failed,done"}, []string{`[lavender-2] phase "Pretrain 1/3" done in 4h12m`}, []string{"BARK done Pretrain 1/3 sent ok=1 fail=0"}},
		{[]string{"--phase.notify=done", "--phase.notify=failed"}, []string{`[lavender-2] phase "Pretrain 1/3" done in 4h12m`}, []string{"BARK done Pretrain 1/3 sent ok=1 fail=0"}},
	} {
		t.Run(strings.Join(tt.notify, " "), func(t *testing.T) {
			clock := newFakeClock()
			r := startPhaseServe(t, clock, "", append([]string{"--phase.stall-after=0"}, tt.notify...)...)
			r.beat("Pretrain 1/3", `"event":"start"`)
			r.waitPolls(2)
			clock.Advance(4*time.Hour + 12*time.Minute)
			r.beat("Pretrain 1/3", `"event":"end"`)
			r.waitPolls(2)
			clock.Advance(watchdog.DoneSettle) // what runs after training did not fail it
			r.wantPushes(tt.want, tt.lines)
		})
	}
}

// TestServePhaseNotifyEmpty: an empty --phase.notify pushes for no phase
// event, and has no phase rule series.
func TestServePhaseNotifyEmpty(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := startPhaseServe(t, clock, "", "--phase.notify=")
	r.beat("Pretrain 1/3", `"event":"start"`)
	clock.Advance(time.Hour)
	r.beat("Pretrain 1/3", `"event":"end","status":"failed"`)
	r.wantPushes(nil, nil)
	_, metrics := testkit.MustDo(t, nil, "GET", r.base+"/metrics", nil, "", "")
	if got := grepLines(metrics, "lavender_watchdog_rule_armed{"); strings.Contains(got, `rule="failed"`) || strings.Contains(got, `rule="stalled"`) {
		t.Errorf("phase rule series with --phase.notify empty:\n%s", got)
	}
}

// TestServePhaseResumeKeepsProgress: serve restarted with --run.resume
// keeps the phase's step and total and when the step last moved, so the
// step stall after the restart is counted from before it.
func TestServePhaseResumeKeepsProgress(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	first := startPhaseServe(t, clock, "")
	first.beat("Pretrain 1/3", `"event":"start","step":0,"total":5000`)
	first.beat("Pretrain 1/3", `"event":"ping","step":1200`)
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	clock.Advance(5 * time.Minute)
	r := startPhaseServe(t, clock, first.logDir, "--run.resume")
	_, body := testkit.MustDo(t, nil, "GET", r.base+"/api/v1/phases", nil, "", "")
	if !strings.Contains(body, `"step":1200,"total":5000`) {
		t.Fatalf("phases after the restart: %s", body)
	}
	r.beat("Pretrain 1/3", `"event":"ping","step":1200`)
	r.waitPolls(2)
	clock.Advance(5 * time.Minute)
	r.wantPushes([]string{`[lavender-2] phase "Pretrain 1/3" stalled: step 1200/5000 for 10m`}, []string{stalledLine})
}

func TestServePhaseFlagErrors(t *testing.T) {
	for _, tt := range []struct{ arg, want string }{
		{"--phase.notify=failed,finished", `--phase.notify: unknown event "finished"; want a list of failed, stalled, loss and done`},
		{"--phase.stall-after=30s", "--phase.stall-after must be at least 1m (or 0 to turn it off), not 30s"},
		{"--phase.stall-after=-1m", "--phase.stall-after must not be negative, not -1m0s"},
	} {
		t.Run(tt.arg, func(t *testing.T) {
			// Checked with the watchdog off too: a bad value never passes silently.
			for _, interval := range []string{"--watchdog.interval=5s", "--watchdog.interval=0"} {
				cli := parseCLI(t, "serve", "--web.listen-address=127.0.0.1:0", "--bark.config-dir="+t.TempDir(),
					"--runlog.dir="+t.TempDir(), "--path.procfs="+testkit.SwapProcfs(t, 0.2), interval, tt.arg)
				err := cli.Serve.serve(t.Context(), &Globals{Logger: slog.New(slog.DiscardHandler), Stdout: io.Discard}, nil, nil)
				if err == nil || err.Error() != tt.want {
					t.Errorf("%s %s: %v, want %q", interval, tt.arg, err, tt.want)
				}
			}
		})
	}
}
