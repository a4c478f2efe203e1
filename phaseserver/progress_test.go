package phaseserver

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/watchdog"
)

func u64(v uint64) *uint64 { return &v }

// step sends one heartbeat carrying step (and total, if non-zero).
func (env *testEnv) step(name, event string, step, total uint64) phaseapi.Phase {
	env.t.Helper()
	req := phaseapi.HeartbeatRequest{Phase: name, Event: event, Step: u64(step)}
	if total > 0 {
		req.Total = u64(total)
	}
	p, err := env.e.Apply(req)
	if err != nil {
		env.t.Fatalf("%s %q step %d/%d: %v", event, name, step, total, err)
	}
	return p
}

// eta is the phase's ETA as the API answers it now, and whether it has one.
func (env *testEnv) eta(name string) (float64, bool) {
	env.t.Helper()
	p, ok := env.phase(name)
	if !ok {
		env.t.Fatalf("no phase %q", name)
	}
	if p.ETASeconds == nil {
		return 0, false
	}
	return *p.ETASeconds, true
}

// run advances the clock by every and the step by perPing, n times.
func (env *testEnv) run(name string, n int, every time.Duration, perPing uint64) {
	env.t.Helper()
	p, _ := env.phase(name)
	s := *p.Step
	for range n {
		env.clock.Advance(every)
		s += perPing
		env.step(name, phaseapi.EventPing, s, 0)
	}
}

func near(got, want, tolerance float64) bool { return math.Abs(got-want) <= tolerance*want }

// The ETA follows a constant rate exactly, needs two advancing heartbeats,
// and is absent without a total.
func TestETAConstantRate(t *testing.T) {
	env := newTestEnv(t)
	env.step("Train", phaseapi.EventStart, 0, 1000)
	env.step("NoTotal", phaseapi.EventStart, 0, 0)
	env.clock.Advance(time.Minute)
	env.step("Train", phaseapi.EventPing, 60, 0)
	env.step("NoTotal", phaseapi.EventPing, 60, 0)
	if eta, ok := env.eta("Train"); ok {
		t.Fatalf("ETA %v after one advance; want none until two", eta)
	}
	env.clock.Advance(time.Minute)
	env.step("Train", phaseapi.EventPing, 120, 0)
	env.step("NoTotal", phaseapi.EventPing, 120, 0)
	if eta, _ := env.eta("Train"); eta != 880 {
		t.Errorf("ETA %v at 1 step/s with 880 steps left, want 880", eta)
	}
	if eta, ok := env.eta("NoTotal"); ok {
		t.Errorf("ETA %v without a total", eta)
	}
	// A ping within the usual interval does not decay the rate.
	env.clock.Advance(30 * time.Second)
	env.step("Train", phaseapi.EventPing, 120, 0)
	if eta, _ := env.eta("Train"); eta != 880 {
		t.Errorf("ETA %v 30 s after the last step, want 880 still", eta)
	}
	p, _ := env.phase("Train")
	if *p.Step != 120 || p.Total != 1000 || !p.ProgressAt.Equal(t0.Add(2*time.Minute)) || p.Advances != 2 {
		t.Errorf("progress %+v", p.Progress)
	}
}

// After the rate doubles, the ETA is past halfway there after one
// half-life and within a few percent after four.
func TestETAFollowsRateChange(t *testing.T) {
	env := newTestEnv(t)
	env.step("Train", phaseapi.EventStart, 0, 100000)
	env.run("Train", 10, time.Minute, 60) // 1 step/s
	env.run("Train", 5, time.Minute, 120) // 2 steps/s for one half-life
	p, _ := env.phase("Train")
	// Ten minutes of history weigh 1 - 2^-2 = 3/4, halved by the half-life
	// since; the last five minutes weigh 1/2.
	if want := (0.75*0.5*1 + 0.5*2) / (0.75*0.5 + 0.5); !near(p.Rate, want, 0.01) {
		t.Errorf("rate %v one half-life after doubling, want %v", p.Rate, want)
	}
	env.run("Train", 15, time.Minute, 120)
	p, _ = env.phase("Train")
	left := float64(100000 - *p.Step)
	if eta, _ := env.eta("Train"); !near(eta, left/2, 0.07) {
		t.Errorf("ETA %v four half-lives after doubling, want about %v", eta, left/2)
	}
}

// The first interval (warm-up, gradient accumulation filling up) counts
// for its length, not for everything until later intervals outvote it: a
// first interval three times as fast as the run leaves the ETA within a few
// percent of the true one after ten intervals, where a first interval taken
// as the rate left it a third too optimistic.
func TestETAFirstIntervalDoesNotOutweigh(t *testing.T) {
	for _, first := range []uint64{30, 1} { // three times as fast, ten times as slow
		env := newTestEnv(t)
		env.step("Train", phaseapi.EventStart, 0, 10000)
		env.run("Train", 1, 30*time.Second, first)
		env.run("Train", 10, 30*time.Second, 10) // the run's own pace: 1 step / 3 s
		p, _ := env.phase("Train")
		eta, _ := env.eta("Train")
		want := float64(10000-*p.Step) * 3
		if !near(eta, want, 0.12) {
			t.Errorf("first interval %d steps in 30 s: ETA %v after ten intervals at 10 steps / 30 s, want about %v", first, eta, want)
		}
		env.run("Train", 1, 30*time.Second, 10)
		if eta2, _ := env.eta("Train"); math.Abs(eta2-want+30) > math.Abs(eta-want) {
			t.Errorf("first interval %d: ETA moved away from the run's pace: %v then %v, want towards %v", first, eta, eta2, want-30)
		}
	}
}

// The API's rate is the one the ETA uses: both decay while no step comes.
// At the total the ETA is 0 in the API as on /metrics.
func TestAPIRateAndETAAgree(t *testing.T) {
	env := newTestEnv(t)
	env.step("Train", phaseapi.EventStart, 0, 100)
	env.run("Train", 3, time.Minute, 10)
	p, _ := env.phase("Train")
	rate, eta := p.Rate, *p.ETASeconds
	env.clock.Advance(11 * time.Minute) // 10 min past the last interval: two half-lives
	p, _ = env.phase("Train")
	if !near(p.Rate, rate/4, 0.01) || p.ETASeconds == nil || !near(*p.ETASeconds, eta*4, 0.01) {
		t.Errorf("after 11 min without a step: rate %v ETA %v; want %v and %v", p.Rate, p.ETASeconds, rate/4, eta*4)
	}
	if !near(float64(100-*p.Step)/p.Rate, *p.ETASeconds, 1e-9) {
		t.Errorf("ETA %v is not steps left / steps_per_second %v", *p.ETASeconds, p.Rate)
	}
	env.step("Train", phaseapi.EventPing, 100, 0)
	p, _ = env.phase("Train")
	if p.ETASeconds == nil || *p.ETASeconds != 0 {
		t.Errorf("at the total: ETA %v, want 0 as lavender_phase_eta_seconds says", p.ETASeconds)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister((*phaseCollector)(env.e))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "lavender_phase_eta_seconds" {
			found = len(mf.Metric) == 1 && mf.Metric[0].GetGauge().GetValue() == 0
		}
	}
	if !found {
		t.Errorf("lavender_phase_eta_seconds is not 0 at the total")
	}
}

// While no step comes, the ETA grows instead of counting down; once steps
// resume at the old rate, it is back within 10% in 15 minutes.
func TestETAPauseAndResume(t *testing.T) {
	env := newTestEnv(t)
	env.step("Train", phaseapi.EventStart, 0, 100000)
	env.run("Train", 10, time.Minute, 60)
	before, _ := env.eta("Train")
	for range 10 { // pings with no progress: an evaluation, or a hang
		env.clock.Advance(time.Minute)
		env.step("Train", phaseapi.EventPing, 600, 0)
	}
	during, ok := env.eta("Train")
	if !ok || during < 2*before {
		t.Errorf("ETA %v after 10 min without a step, want it well above %v", during, before)
	}
	if p, _ := env.phase("Train"); !p.ProgressAt.Equal(t0.Add(10 * time.Minute)) {
		t.Errorf("last progress %v, want when the step last moved", p.ProgressAt)
	}
	env.run("Train", 15, time.Minute, 60)
	p, _ := env.phase("Train")
	left := float64(100000 - *p.Step)
	if after, _ := env.eta("Train"); !near(after, left, 0.10) {
		t.Errorf("ETA %v 15 min after resuming at 1 step/s, want within 10%% of %v", after, left)
	}
}

// A step that goes backwards (a run resumed from a checkpoint) is recorded
// as it comes and starts the rate afresh.
func TestETABackwardsStep(t *testing.T) {
	env := newTestEnv(t)
	env.step("Train", phaseapi.EventStart, 0, 10000)
	env.run("Train", 10, time.Minute, 60)
	env.clock.Advance(time.Minute)
	p := env.step("Train", phaseapi.EventPing, 100, 0)
	if *p.Step != 100 || p.ETASeconds != nil || p.Advances != 0 {
		t.Errorf("after going back: %+v; want step 100 and no ETA yet", p.Progress)
	}
	env.run("Train", 2, time.Minute, 180) // 3 steps/s now
	if eta, _ := env.eta("Train"); eta != float64(10000-460)/3 {
		t.Errorf("ETA %v, want %v from the new rate alone", eta, float64(10000-460)/3)
	}
}

// Progress survives a restart, crash or clean, and the ETA with it.
func TestRestartKeepsProgress(t *testing.T) {
	env := newTestEnv(t)
	env.step("Train", phaseapi.EventStart, 0, 1000)
	env.run("Train", 3, time.Minute, 60)
	want, _ := env.phase("Train")
	if err := env.e.Close(); err != nil {
		t.Fatal(err)
	}
	env.restart()
	got, ok := env.phase("Train")
	if !ok || got.Step == nil || *got.Step != 180 || got.Total != 1000 || !got.ProgressAt.Equal(want.ProgressAt) ||
		got.Advances != 3 || got.Rate != want.Rate || got.ETASeconds == nil || want.ETASeconds == nil || *got.ETASeconds != *want.ETASeconds {
		t.Errorf("after restart %+v, want %+v", got.Progress, want.Progress)
	}
	// A phase that reported step 0 keeps it: 0 is a step, not "none".
	env.step("Zero", phaseapi.EventStart, 0, 0)
	env.restart()
	if p, _ := env.phase("Zero"); p.Step == nil || *p.Step != 0 {
		t.Errorf("step 0 lost across a restart: %+v", p.Progress)
	}
}

func TestAPIProgress(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	post := func(body string) (int, string) {
		code, _, data := request(t, http.MethodPost, srv.URL+phaseapi.HeartbeatPath, body)
		return code, string(data)
	}
	if code, body := post(`{"phase":"Train","event":"start","step":0,"total":300}`); code != 200 {
		t.Fatalf("start with progress: %d %s", code, body)
	}
	for i, s := range []int{100, 200} {
		env.clock.Advance(time.Minute)
		if code, body := post(fmt.Sprintf(`{"phase":"Train","event":"ping","step":%d}`, s)); code != 200 {
			t.Fatalf("ping %d: %d %s", i, code, body)
		}
	}
	for _, tc := range []struct{ name, body, want string }{
		{"step past new total", `{"phase":"Train","event":"ping","step":250,"total":240}`, "step 250 is past the total of 240"},
		{"total below step", `{"phase":"Train","event":"ping","total":150}`, "step 200 is past the total of 150"},
		{"total 0", `{"phase":"Train","event":"ping","total":0}`, "total must be 1 or more"},
		{"negative step", `{"phase":"Train","event":"ping","step":-1}`, `"step" must be a whole number, 0 or more`},
		{"fractional step", `{"phase":"Train","event":"ping","step":1.5}`, `"step" must be a whole number, 0 or more`},
		{"negative total", `{"phase":"Train","event":"ping","total":-3}`, `"total" must be a whole number, 0 or more`},
		{"step as text", `{"phase":"Train","event":"ping","step":"5"}`, `"step" must be a number, not a string`},
		{"unknown field still refused", `{"phase":"Train","event":"ping","steps":5}`, `unknown field "steps"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshotState(t, env)
			code, body := post(tc.body)
			var e phaseapi.ErrorResponse
			_ = json.Unmarshal([]byte(body), &e)
			if code != http.StatusBadRequest || !strings.Contains(e.Error, tc.want) {
				t.Errorf("%s: %d %s, want 400 saying %s", tc.body, code, body, tc.want)
			}
			if after := snapshotState(t, env); after != before {
				t.Errorf("state changed:\n%s\nwant\n%s", after, before)
			}
		})
	}
	_, _, data := request(t, http.MethodGet, srv.URL+phaseapi.PhasesPath, "")
	var raw struct{ Phases []map[string]any }
	if err := json.Unmarshal(data, &raw); err != nil || len(raw.Phases) != 1 {
		t.Fatalf("phases: %s (%v)", data, err)
	}
	p := raw.Phases[0]
	if p["step"] != 200.0 || p["total"] != 300.0 || p["eta_seconds"] != 60.0 || p["last_progress"] != t0.Add(2*time.Minute).Format(time.RFC3339) {
		t.Errorf("phase as the API shows it: %s", data)
	}
	// A step that goes back is accepted; the end records its last step.
	if code, body := post(`{"phase":"Train","event":"ping","step":50}`); code != 200 || !strings.Contains(body, `"step":50`) {
		t.Errorf("backwards step: %d %s", code, body)
	}
	if code, body := post(`{"phase":"Train","event":"end","step":300}`); code != 200 || !strings.Contains(body, `"step":300`) || strings.Contains(body, "eta_seconds") {
		t.Errorf("end with step: %d %s; want the step and no ETA", code, body)
	}
}

// The progress metrics, checked against a golden file and promlint; a
// phase without progress has none of them.
func TestProgressMetrics(t *testing.T) {
	env := newTestEnv(t)
	env.beat("Plain", phaseapi.EventStart, "")
	env.step("Train", phaseapi.EventStart, 0, 1000)
	env.run("Train", 2, time.Minute, 100)
	goldenCompare(t, (*phaseCollector)(env.e), func() prometheus.Collector { return (*phaseCollector)(env.e) }, "phases_progress")
	problems, err := testutil.GatherAndLint(env.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for name, want := range map[string]int{"lavender_phase_step": 1, "lavender_phase_total_steps": 1,
		"lavender_phase_last_progress_timestamp_seconds": 1, "lavender_phase_eta_seconds": 1} {
		if n, err := testutil.GatherAndCount(env.reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
}

// Every interval counts by its length from the first one on: a first step
// that comes at once after the start (the client sends it as soon as it is
// taken) weighs its 50 ms, not as much as the next interval, so the rate is
// the run's true pace, steps over seconds, within a few percent (when the
// first interval counted as much as the second, 2.33 steps/s for a true
// 0.44 after 25 s).
func TestRateWeighsFirstIntervalByLength(t *testing.T) {
	for _, tc := range []struct {
		name       string
		first      time.Duration
		firstSteps uint64
		every      time.Duration
		perPing    uint64
		pings      int
	}{
		{"instant first step, then 2 steps per 5 s", 50 * time.Millisecond, 1, 5 * time.Second, 2, 1},
		{"instant first step, then 2 steps per 5 s, five times", 50 * time.Millisecond, 1, 5 * time.Second, 2, 5},
		{"instant first step, then 1 step per minute", 10 * time.Millisecond, 1, time.Minute, 1, 3},
		{"equal intervals", 5 * time.Second, 2, 5 * time.Second, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p phaseapi.Progress
			now := t0
			advanceProgress(&p, u64(0), u64(100000), now)
			now = now.Add(tc.first)
			step := tc.firstSteps
			advanceProgress(&p, u64(step), nil, now)
			for range tc.pings {
				now = now.Add(tc.every)
				step += tc.perPing
				advanceProgress(&p, u64(step), nil, now)
			}
			// Over a few minutes the decay is small: the weighted average
			// is close to the plain one, steps over seconds.
			want := float64(step) / now.Sub(t0).Seconds()
			if !near(p.Rate, want, 0.05) {
				t.Errorf("rate %.3f steps/s, want about %.3f (%d steps in %v)", p.Rate, want, step, now.Sub(t0))
			}
		})
	}
}

// answer is a heartbeat answer as a client reads it: the phase and the
// warning beside it.
type answer struct {
	phaseapi.Phase
	Warning string `json:"warning"`
	Error   string `json:"error"`
}

func postHeartbeat(t *testing.T, srv string, body string) (int, answer) {
	t.Helper()
	code, _, data := request(t, http.MethodPost, srv+phaseapi.HeartbeatPath, body)
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("%s: answer %s: %v", body, data, err)
	}
	return code, a
}

// A step past the total the phase was given, sent without a total, is taken
// (a loop that steps twice per batch, a GAN's two optimizers, counted
// against a total of batches) and drops the total that proved short: no
// total and no ETA rather than 100% and an ETA of 0 for a run that goes
// on. The step keeps moving, so neither the rate nor the stall rule loses
// it; a total sent again is taken again.
func TestStepPastTotalWithoutTotalDropsIt(t *testing.T) {
	for _, tc := range []struct {
		name        string
		total       uint64
		steps       []uint64
		wantAdvance uint64 // advancing pings after the start at step 0
	}{
		{"one past", 10, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 12},
		{"two optimizer steps a batch", 8, []uint64{2, 4, 6, 8, 10, 12, 14, 16}, 8},
		{"straight past", 100, []uint64{40, 80, 120}, 3},
		{"the same step past, twice", 5, []uint64{6, 6}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			srv := env.server()
			if code, a := postHeartbeat(t, srv.URL, fmt.Sprintf(`{"phase":"GAN","event":"start","step":0,"total":%d}`, tc.total)); code != 200 {
				t.Fatalf("start: %d %s", code, a.Error)
			}
			var last phaseapi.Phase
			for _, s := range tc.steps {
				env.clock.Advance(time.Minute)
				code, a := postHeartbeat(t, srv.URL, fmt.Sprintf(`{"phase":"GAN","event":"ping","step":%d}`, s))
				if code != 200 || a.Warning != "" {
					t.Fatalf("ping step %d of %d: %d %q %q, want 200 and no warning", s, tc.total, code, a.Error, a.Warning)
				}
				last = a.Phase
			}
			final := tc.steps[len(tc.steps)-1]
			if last.Step == nil || *last.Step != final || last.Total != 0 || last.ETASeconds != nil {
				t.Errorf("after step %d: %+v, want step %d, no total and no ETA", final, last.Progress, final)
			}
			if last.Advances != tc.wantAdvance || last.Rate <= 0 {
				t.Errorf("after step %d: %d advances at %g steps/s, want %d and a rate", final, last.Advances, last.Rate, tc.wantAdvance)
			}
			// last_progress is when the step last moved, which is what the
			// stall rule reads: nothing stalls while the step keeps moving.
			if want := t0.Add(time.Duration(slices.Index(tc.steps, final)+1) * time.Minute); !last.ProgressAt.Equal(want) {
				t.Errorf("last_progress %v, want %v", last.ProgressAt, want)
			}
			if _, _, stalled := watchdog.Stalled(last, last.ProgressAt.Add(9*time.Minute), time.Time{}, 10*time.Minute); stalled {
				t.Errorf("stalled 9 minutes after the step last moved, with pings coming")
			}
			for name, want := range map[string]int{"lavender_phase_step": 1, "lavender_phase_total_steps": 0, "lavender_phase_eta_seconds": 0} {
				if n, err := testutil.GatherAndCount(env.reg, name); err != nil || n != want {
					t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
				}
			}
			// A total sent again (a client that learned the real one) counts.
			env.clock.Advance(time.Minute)
			if code, a := postHeartbeat(t, srv.URL, fmt.Sprintf(`{"phase":"GAN","event":"ping","step":%d,"total":%d}`, final+1, 4*final)); code != 200 ||
				a.Total != 4*final || a.ETASeconds == nil {
				t.Errorf("ping with a new total: %d %q %+v, want the total and an ETA", code, a.Error, a.Progress)
			}
			// The saved table agrees.
			if err := env.e.Close(); err != nil {
				t.Fatal(err)
			}
			env.restart()
			if p, _ := env.phase("GAN"); p.Total != 4*final {
				t.Errorf("after a restart: total %d, want %d", p.Total, 4*final)
			}
		})
	}
}

// An end is never refused for its progress: the end, ok or failed with its
// reason, is recorded (status, END line, the end the watchdog pushes), and
// progress that contradicts itself or the phase is left out, the answer
// saying so. A step past the known total is no contradiction at all.
func TestEndIsNeverRefusedForItsProgress(t *testing.T) {
	for _, tc := range []struct {
		name, end           string
		wantStatus, wantEnd string
		wantReason          string
		wantStep, wantTotal uint64
		wantWarning         string
	}{
		{
			name: "ok, step past the total", end: `{"phase":"GAN","event":"end","step":16}`,
			wantStatus: "ok", wantEnd: "END   GAN 300s", wantStep: 16,
		},
		{
			name: "failed with reason, step past the total", end: `{"phase":"GAN","event":"end","status":"failed","reason":"RuntimeError: CUDA out of memory","step":16}`,
			wantStatus: "failed", wantEnd: "END   GAN 300s failed: RuntimeError", wantReason: "RuntimeError: CUDA out of memory", wantStep: 16,
		},
		{
			name: "ok, step past its own total", end: `{"phase":"GAN","event":"end","step":16,"total":8}`,
			wantStatus: "ok", wantEnd: "END   GAN 300s", wantStep: 4, wantTotal: 8,
			wantWarning: "end recorded without its step and total (bad progress: step 16 is past the total of 8)",
		},
		{
			name: "failed with reason, step past its own total", end: `{"phase":"GAN","event":"end","status":"failed","reason":"ValueError: bad batch","step":16,"total":8}`,
			wantStatus: "failed", wantEnd: "END   GAN 300s failed: ValueError", wantReason: "ValueError: bad batch", wantStep: 4, wantTotal: 8,
			wantWarning: "step 16 is past the total of 8",
		},
		{
			name: "ok, a total below the step", end: `{"phase":"GAN","event":"end","total":3}`,
			wantStatus: "ok", wantEnd: "END   GAN 300s", wantStep: 4, wantTotal: 8,
			wantWarning: "step 4 is past the total of 3",
		},
		{
			name: "failed, a total of 0", end: `{"phase":"GAN","event":"end","status":"failed","reason":"exit code 1","step":5,"total":0}`,
			wantStatus: "failed", wantEnd: "END   GAN 300s failed: exit code 1", wantReason: "exit code 1", wantStep: 4, wantTotal: 8,
			wantWarning: "total must be 1 or more",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			srv := env.server()
			env.step("GAN", phaseapi.EventStart, 0, 8)
			for _, s := range []uint64{2, 4} {
				env.clock.Advance(time.Minute)
				env.step("GAN", phaseapi.EventPing, s, 0)
			}
			env.clock.Advance(3 * time.Minute)
			code, a := postHeartbeat(t, srv.URL, tc.end)
			if code != http.StatusOK {
				t.Fatalf("%s: %d %s, want 200", tc.end, code, a.Error)
			}
			if tc.wantWarning == "" && a.Warning != "" || !strings.Contains(a.Warning, tc.wantWarning) {
				t.Errorf("warning %q, want one saying %q", a.Warning, tc.wantWarning)
			}
			p, _ := env.phase("GAN")
			if p.Status != tc.wantStatus || p.Reason != tc.wantReason || p.StepNow() != tc.wantStep || p.Total != tc.wantTotal || p.ETASeconds != nil {
				t.Errorf("phase %s %q step %d/%d eta %v, want %s %q step %d/%d and no ETA",
					p.Status, p.Reason, p.StepNow(), p.Total, p.ETASeconds, tc.wantStatus, tc.wantReason, tc.wantStep, tc.wantTotal)
			}
			if entries := env.entries(); entries[len(entries)-1] != tc.wantEnd {
				t.Errorf("run log ends %q, want %q", entries[len(entries)-1], tc.wantEnd)
			}
			ends := env.e.Ends()
			if len(ends) != 1 || ends[0].Status != tc.wantStatus || ends[0].Reason != tc.wantReason || ends[0].Died {
				t.Errorf("ends for the watchdog %+v, want one %s end with reason %q", ends, tc.wantStatus, tc.wantReason)
			}
			if n := testutil.ToFloat64(env.e.refusedTotal.WithLabelValues(refusedBadField)); n != 0 {
				t.Errorf("%g heartbeats counted as refused, want none", n)
			}
		})
	}
}

// Step and total that contradict each other in one start or ping are a
// client's bug: a 400 that names them, and nothing changes. So is a total
// alone below the step the phase has reached: nothing says which is wrong.
func TestStepPastTotalInOneRequestIsRefused(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	env.step("GAN", phaseapi.EventStart, 0, 8)
	env.clock.Advance(time.Minute)
	env.step("GAN", phaseapi.EventPing, 4, 0)
	for _, tc := range []struct{ name, body, want string }{
		{"ping", `{"phase":"GAN","event":"ping","step":16,"total":8}`, "bad progress: step 16 is past the total of 8"},
		{"ping, a new total", `{"phase":"GAN","event":"ping","step":16,"total":10}`, "bad progress: step 16 is past the total of 10"},
		{"start", `{"phase":"GAN","event":"start","step":3,"total":2}`, "bad progress: step 3 is past the total of 2"},
		{"a total alone below the step", `{"phase":"GAN","event":"ping","total":3}`, "bad progress: step 4 is past the total of 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshotState(t, env)
			code, a := postHeartbeat(t, srv.URL, tc.body)
			if code != http.StatusBadRequest || a.Error != tc.want {
				t.Errorf("%s: %d %q, want 400 %q", tc.body, code, a.Error, tc.want)
			}
			if after := snapshotState(t, env); after != before {
				t.Errorf("state changed:\n%s\nwant\n%s", after, before)
			}
		})
	}
}
