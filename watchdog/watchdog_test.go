package watchdog

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/phaseapi"
)

// fakePusher records every push and answers as one target would.
type fakePusher struct {
	pushes [][]Alert
	accept bool
}

func (p *fakePusher) Push(_ context.Context, alerts []Alert) (ok, failed int) {
	p.pushes = append(p.pushes, alerts)
	if p.accept {
		return 1, 0
	}
	return 0, 1
}

var t0 = time.Date(2026, 4, 24, 0, 41, 41, 0, time.UTC)

// rig drives a Watchdog through a script of polls on a fake clock.
type rig struct {
	t      *testing.T
	wd     *Watchdog
	pusher *fakePusher
	reg    *prometheus.Registry
	hist   *History
	now    time.Time
	next   Sample
	err    error
	logs   *bytes.Buffer
}

func newRig(t *testing.T, flags RuleFlags) *rig {
	t.Helper()
	r := &rig{t: t, pusher: &fakePusher{accept: true}, reg: prometheus.NewRegistry(), hist: NewHistory(0), now: t0, logs: &bytes.Buffer{}}
	rules, err := NewRules(flags)
	if err != nil {
		t.Fatal(err)
	}
	wd, err := New(Config{
		Interval: flags.Interval, Rules: rules, Push: r.pusher, History: r.hist,
		Read:       func(context.Context) (Sample, error) { return r.next, r.err },
		Logger:     slog.New(slog.NewTextHandler(r.logs, nil)),
		Registerer: r.reg,
		Now:        func() time.Time { return r.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.wd = wd
	return r
}

// swapOnly is today's watchdog: the swap rule alone.
func swapOnly(repeat time.Duration) RuleFlags {
	return RuleFlags{Interval: 5 * time.Second, Threshold: 0.5, Hysteresis: 0.05, Repeat: repeat}
}

func gib(f float64) uint64 { return uint64(f * (1 << 30)) }

func swapOf(ratio float64) Swap {
	return Swap{Ratio: ratio, UsedBytes: gib(32 * ratio), TotalBytes: gib(32)}
}

// poll advances the clock, polls with s, and returns the pushes it made.
func (r *rig) poll(after time.Duration, s Sample) [][]Alert {
	r.now = r.now.Add(after)
	r.next = s
	before := len(r.pusher.pushes)
	r.wd.Poll(context.Background())
	return r.pusher.pushes[before:]
}

// pollSwap sets swap to ratio of 32 GiB, polls, and counts the pushes.
func (r *rig) pollSwap(after time.Duration, ratio float64) int {
	return len(r.poll(after, Sample{Swap: swapOf(ratio)}))
}

func TestWatchdogScript(t *testing.T) {
	r := newRig(t, swapOnly(time.Minute))
	steps := []struct {
		after time.Duration
		ratio float64
		want  int
		why   string
	}{
		{0, 0.30, 0, "below the threshold"},
		{5 * time.Second, 0.54, 1, "crossing pushes at once"},
		{5 * time.Second, 0.56, 0, "still high: no second push"},
		{54 * time.Second, 0.58, 0, "a second short of repeat"},
		{1 * time.Second, 0.58, 1, "a reminder once repeat has passed"},
		{5 * time.Second, 0.47, 0, "inside the hysteresis band: not re-armed"},
		{5 * time.Second, 0.52, 0, "back above, but not re-armed and not yet due"},
		{5 * time.Second, 0.20, 1, "well below: re-armed, and the phone hears it resolved"},
		{5 * time.Second, 0.60, 1, "a new crossing pushes again"},
		{5 * time.Second, 0.50, 0, "exactly at the threshold, already pushed"},
	}
	for i, s := range steps {
		if got := r.pollSwap(s.after, s.ratio); got != s.want {
			t.Fatalf("step %d (%s): %d pushes, want %d", i, s.why, got, s.want)
		}
	}
	var got []string
	for _, p := range r.pusher.pushes {
		if len(p) != 1 {
			t.Fatalf("push of %d alerts, want 1: %+v", len(p), p)
		}
		a := p[0]
		got = append(got, fmt.Sprintf("%s %s %.2f began+%s lasted %s", a.Rule, a.Status, a.Sample.Swap.Ratio, a.Began.Sub(t0), a.Lasted()))
	}
	want := []string{
		"swap firing 0.54 began+5s lasted 0s",
		"swap reminder 0.58 began+5s lasted 1m0s",
		"swap resolved 0.20 began+5s lasted 1m15s",
		"swap firing 0.60 began+1m25s lasted 0s",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("pushes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if first := r.pusher.pushes[0][0].Sample; first.Swap.TotalBytes != gib(32) || !first.Time.Equal(t0.Add(5*time.Second)) {
		t.Errorf("first push carried %+v", first)
	}
	if got := testutil.ToFloat64(r.wd.polls); got != float64(len(steps)) {
		t.Errorf("polls_total %v, want %d", got, len(steps))
	}
}

func TestWatchdogExactlyAtThreshold(t *testing.T) {
	r := newRig(t, swapOnly(0))
	if got := r.pollSwap(0, 0.5); got != 1 {
		t.Errorf("50%% exactly: %d pushes, want 1 (the rule is used >= threshold)", got)
	}
	if got := r.pollSwap(time.Hour, 0.9); got != 0 {
		t.Errorf("repeat 0 means no reminders, got %d pushes", got)
	}
}

func TestWatchdogNoSwapNeverPushes(t *testing.T) {
	r := newRig(t, swapOnly(time.Second))
	for i := range 5 {
		if n := len(r.poll(time.Minute, Sample{})); n != 0 {
			t.Fatalf("poll %d: %d pushes on a host with no swap", i, n)
		}
	}
}

func TestWatchdogRetriesWithBackoffWhenEveryTargetFails(t *testing.T) {
	r := newRig(t, swapOnly(time.Minute))
	r.pusher.accept = false
	// Every 5s: push at 0s fails, retry at 5s, then after 10s (15s), then
	// after 20s (35s), then after 40s (75s).
	want := []int{1, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}
	for i, w := range want {
		after := 5 * time.Second
		if i == 0 {
			after = 0
		}
		if got := r.pollSwap(after, 0.7); got != w {
			t.Fatalf("poll %d: %d pushes, want %d", i, got, w)
		}
	}
	r.pusher.accept = true
	if got := r.pollSwap(5*time.Second, 0.7); got != 1 {
		t.Fatalf("the retry at 75s: %d pushes, want 1", got)
	}
	if got := r.pollSwap(5*time.Second, 0.7); got != 0 {
		t.Errorf("after a push got through, the watchdog must wait for repeat; got %d pushes", got)
	}
	for i, p := range r.pusher.pushes {
		if p[0].Status != Firing || !p[0].Began.Equal(t0) {
			t.Errorf("push %d: %s began %s; a retry is still the incident's first push", i, p[0].Status, p[0].Began)
		}
	}
}

func TestWatchdogBackoffCappedAtRepeat(t *testing.T) {
	r := newRig(t, swapOnly(12*time.Second))
	r.pusher.accept = false
	// Retries after 5s, 10s, then 12s (the repeat), and 12s again.
	var at []time.Duration
	for i := range 12 {
		if r.pollSwap(time.Second*time.Duration(min(i, 1)), 0.7) > 0 {
			at = append(at, r.now.Sub(t0))
		}
	}
	for range 40 {
		if r.pollSwap(time.Second, 0.7) > 0 {
			at = append(at, r.now.Sub(t0))
		}
	}
	want := []time.Duration{0, 5 * time.Second, 15 * time.Second, 27 * time.Second, 39 * time.Second, 51 * time.Second}
	if fmt.Sprint(at) != fmt.Sprint(want) {
		t.Errorf("pushes at %v, want %v", at, want)
	}
}

func TestWatchdogReadErrors(t *testing.T) {
	r := newRig(t, swapOnly(time.Minute))
	_, statErr := os.Stat("/nonexistent/proc/meminfo")
	for _, tc := range []struct {
		err   error
		class string
	}{
		{fmt.Errorf("exporter: read swap: %w", statErr), "PathError"},
		{fmt.Errorf("exporter: parse meminfo: %w", fmt.Errorf("bad line")), "Error"},
		{&fs.PathError{Op: "open", Path: "/proc/vmstat", Err: fs.ErrPermission}, "PathError"},
	} {
		r.logs.Reset()
		r.err = tc.err
		r.wd.Poll(context.Background())
		line := r.logs.String()
		want := "[swap watchdog] error: " + tc.class + ": " + tc.err.Error()
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %q", line, want)
		}
		if _, err := r.hist.Latest(); err != tc.err {
			t.Errorf("history's latest error %v, want %v", err, tc.err)
		}
	}
	if got := testutil.ToFloat64(r.wd.errs); got != 3 {
		t.Errorf("errors_total %v, want 3", got)
	}
	if len(r.pusher.pushes) != 0 {
		t.Error("a failed read must not push")
	}
	if n := len(r.hist.Samples()); n != 0 {
		t.Errorf("failed reads kept %d samples", n)
	}
	r.err = nil
	if got := r.pollSwap(0, 0.6); got != 1 {
		t.Errorf("after errors the watchdog must keep working: %d pushes", got)
	}
	if s, err := r.hist.Latest(); err != nil || s.Swap.Ratio != 0.6 {
		t.Errorf("history after recovery: %+v, %v", s, err)
	}
}

func TestConfigErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*RuleFlags)
		want   string
	}{
		{"threshold above 1", func(f *RuleFlags) { f.Threshold = 1.5 }, "--watchdog.threshold must be in (0, 1], not 1.5"},
		{"threshold zero", func(f *RuleFlags) { f.Threshold = 0 }, "--watchdog.threshold must be in (0, 1], not 0"},
		{"threshold NaN", func(f *RuleFlags) { f.Threshold = nan() }, "--watchdog.threshold must be in (0, 1]"},
		{"negative repeat", func(f *RuleFlags) { f.Repeat = -time.Second }, "--watchdog.repeat must not be negative, not -1s"},
		{"negative interval", func(f *RuleFlags) { f.Interval = -time.Second }, "--watchdog.interval must not be negative"},
		{"hysteresis past the threshold", func(f *RuleFlags) { f.Hysteresis = 0.5 }, "--watchdog.hysteresis must be in [0, --watchdog.threshold 0.5), not 0.5"},
		{"negative hysteresis", func(f *RuleFlags) { f.Hysteresis = -0.01 }, "--watchdog.hysteresis"},
		{"pressure above 1", func(f *RuleFlags) { f.PressureThreshold = 1.1 }, "--watchdog.pressure-threshold must be in [0, 1], not 1.1"},
		{"pressure negative", func(f *RuleFlags) { f.PressureThreshold = -0.1 }, "--watchdog.pressure-threshold must be in [0, 1]"},
		{"pressure below the hysteresis", func(f *RuleFlags) { f.PressureThreshold = 0.03 }, "--watchdog.hysteresis must be in [0, --watchdog.pressure-threshold 0.03), not 0.05"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultRuleFlags
			tc.change(&f)
			_, err := NewRules(f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := New(Config{Interval: -time.Second, Read: func(context.Context) (Sample, error) { return Sample{}, nil }}); err == nil ||
		!strings.Contains(err.Error(), "--watchdog.interval") {
		t.Errorf("New with a negative interval: %v", err)
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestNewRulesFollowsTheFlags(t *testing.T) {
	names := func(f RuleFlags) string {
		rules, err := NewRules(f)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, r := range rules {
			n = append(n, string(r.Name()))
		}
		return strings.Join(n, ",")
	}
	if got := names(DefaultRuleFlags); got != "swap,pressure,oom,gpu,gpu-lost,gpu-ecc,gpu-remap,gpu-hang,gpu-idle,gpu-slowdown,disk" {
		t.Errorf("defaults give rules %s", got)
	}
	f := DefaultRuleFlags
	f.PressureThreshold, f.OOM, f.GPU = 0, false, false
	if got := names(f); got != "swap,gpu,disk" {
		t.Errorf("pressure 0, no oom and no GPU rules give rules %s, want swap,gpu,disk", got)
	}
	f = DefaultRuleFlags
	f.GPUHangAfter, f.GPUIdleAfter, f.GPUSlowdownAfter = 0, 0, 0
	if got := names(f); got != "swap,pressure,oom,gpu,gpu-lost,gpu-ecc,gpu-remap,disk" {
		t.Errorf("GPU durations 0 give rules %s, want the GPU faults alone", got)
	}
}

func TestConfigNeedsReaderAndPusher(t *testing.T) {
	read := func(context.Context) (Sample, error) { return Sample{}, nil }
	swap, err := NewSwapRule(SwapConfig{Threshold: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"no reader":           {Push: &fakePusher{}},
		"rules but no pusher": {Read: read, Rules: []Rule{swap}},
		"two rules one name":  {Read: read, Push: &fakePusher{}, Rules: []Rule{swap, swap}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(Config{Read: read}); err != nil {
		t.Errorf("a watchdog that only samples: %v", err)
	}
}

// armedProbe records the armed gauges at the moment of each push.
type armedProbe struct {
	wd     **Watchdog
	atPush []string
}

func (p *armedProbe) Push(context.Context, []Alert) (int, int) {
	w := *p.wd
	p.atPush = append(p.atPush, fmt.Sprintf("%v %v", testutil.ToFloat64(w.swapArmed), testutil.ToFloat64(w.ruleArmed.WithLabelValues(string(RuleSwap)))))
	if st := w.State(); st[0].Armed {
		p.atPush = append(p.atPush, "State() armed")
	}
	return 1, 0
}

func TestWatchdogDisarmedBeforeThePushLeaves(t *testing.T) {
	var wd *Watchdog
	probe := &armedProbe{wd: &wd}
	swap, err := NewSwapRule(SwapConfig{Threshold: 0.5, Hysteresis: 0.05, Repeat: time.Hour, Retry: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	read := func(context.Context) (Sample, error) { return Sample{Swap: swapOf(0.6)}, nil }
	wd, err = New(Config{Interval: time.Second, Read: read, Rules: []Rule{swap}, Push: probe})
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(wd.swapArmed); got != 1 {
		t.Fatalf("armed %v before any poll, want 1", got)
	}
	wd.Poll(context.Background())
	if fmt.Sprint(probe.atPush) != "[0 0]" {
		t.Errorf("armed gauges at push time: %v, want [0 0]: a watcher that sees the push must not see it armed", probe.atPush)
	}
}

func TestSeveralRulesInOnePollGiveOnePush(t *testing.T) {
	r := newRig(t, DefaultRuleFlags)
	base := Sample{Swap: swapOf(0.2), Pressure: Pressure{Available: true, Some: 0.01}, OOM: OOM{Available: true, Kills: 3}}
	if n := len(r.poll(0, base)); n != 0 {
		t.Fatalf("a calm host with old kills: %d pushes", n)
	}
	storm := Sample{
		Swap:     swapOf(0.56),
		Pressure: Pressure{Available: true, Some: 0.23, Full: 0.20},
		OOM:      OOM{Available: true, Kills: 4, Victim: Victim{PID: 4242, Name: "python3"}},
		Phases:   []phaseapi.Phase{{Name: "Pretrain 1/3", Status: phaseapi.StatusActive, Started: t0}},
	}
	pushes := r.poll(5*time.Second, storm)
	if len(pushes) != 1 {
		t.Fatalf("%d pushes, want one carrying every rule", len(pushes))
	}
	var got []string
	for _, a := range pushes[0] {
		got = append(got, fmt.Sprintf("%s %s kills=%d victim=%s/%d phase=%q", a.Rule, a.Status, a.Kills, a.Victim.Name, a.Victim.PID, a.Phase))
	}
	want := `swap firing kills=0 victim=/0 phase=""
pressure firing kills=0 victim=/0 phase=""
oom firing kills=1 victim=python3/4242 phase=""`
	if strings.Join(got, "\n") != want {
		t.Errorf("alerts:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
	for _, st := range r.wd.State() {
		if (st.Name == RuleSwap || st.Name == RulePressure) && (st.Armed || !st.Since.Equal(r.now)) {
			t.Errorf("state after the push: %+v", st)
		}
	}
	if n := len(r.poll(5*time.Second, storm)); n != 0 {
		t.Errorf("the same storm a poll later: %d pushes, want 0 (no new kill, not yet a reminder)", n)
	}

	// Every target fails: every rule backs off, and each retry is one push.
	r.pusher.accept = false
	storm.OOM.Kills = 5
	if p := r.poll(5*time.Second, storm); len(p) != 1 || len(p[0]) != 1 || p[0][0].Rule != RuleOOM {
		t.Fatalf("a new kill alone: %+v", p)
	}
	// The repeat (10m) falls due for swap and pressure together, and the
	// OOM retry with them after its 5s backoff.
	r.pusher.accept = true
	p := r.poll(10*time.Minute, storm)
	if len(p) != 1 || len(p[0]) != 3 {
		t.Fatalf("reminders and the oom retry: %+v", p)
	}
	if p[0][0].Status != Reminder || p[0][1].Status != Reminder || p[0][2].Status != Firing || p[0][2].Kills != 1 {
		t.Errorf("statuses %s %s %s (kills %d)", p[0][0].Status, p[0][1].Status, p[0][2].Status, p[0][2].Kills)
	}
}

func TestMetrics(t *testing.T) {
	r := newRig(t, DefaultRuleFlags)
	r.pollSwap(0, 0.6)
	want := `
# HELP lavender_watchdog_armed 1 while the watchdog will push on the next crossing of its swap threshold, 0 after it pushed and until swap falls below threshold minus hysteresis.
# TYPE lavender_watchdog_armed gauge
lavender_watchdog_armed 0
# HELP lavender_watchdog_errors_total Watchdog polls that could not read the host.
# TYPE lavender_watchdog_errors_total counter
lavender_watchdog_errors_total 0
# HELP lavender_watchdog_polls_total Polls of the host made by the built-in watchdog.
# TYPE lavender_watchdog_polls_total counter
lavender_watchdog_polls_total 1
# HELP lavender_watchdog_rule_armed 1 while the watchdog rule will push on the next crossing of its threshold, 0 from its push until the incident ends.
# TYPE lavender_watchdog_rule_armed gauge
lavender_watchdog_rule_armed{rule="disk"} 1
lavender_watchdog_rule_armed{rule="gpu"} 1
lavender_watchdog_rule_armed{rule="gpu-ecc"} 1
lavender_watchdog_rule_armed{rule="gpu-hang"} 1
lavender_watchdog_rule_armed{rule="gpu-idle"} 1
lavender_watchdog_rule_armed{rule="gpu-lost"} 1
lavender_watchdog_rule_armed{rule="gpu-remap"} 1
lavender_watchdog_rule_armed{rule="gpu-slowdown"} 1
lavender_watchdog_rule_armed{rule="oom"} 1
lavender_watchdog_rule_armed{rule="pressure"} 1
lavender_watchdog_rule_armed{rule="swap"} 0
`
	if err := testutil.GatherAndCompare(r.reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(r.reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestSamplingOnlyRegistersNothingAndKeepsHistory(t *testing.T) {
	hist := NewHistory(time.Second)
	now := t0
	wd, err := New(Config{
		Read:    func(context.Context) (Sample, error) { return Sample{Swap: swapOf(0.9)}, nil },
		History: hist,
		Now:     func() time.Time { now = now.Add(time.Second); return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		wd.Poll(context.Background())
	}
	if n := len(hist.Samples()); n != 3 {
		t.Errorf("%d samples, want 3", n)
	}
	if st := wd.State(); len(st) != 0 {
		t.Errorf("state %+v with no rules", st)
	}
}

// TestRunPollsUntilCancelled waits for polls without a deadline of its own:
// the loop must poll, and must return once ctx ends.
func TestRunPollsUntilCancelled(t *testing.T) {
	polled := make(chan struct{}, 1)
	wd, err := New(Config{
		Interval: time.Millisecond,
		Read: func(context.Context) (Sample, error) {
			select {
			case polled <- struct{}{}:
			default:
			}
			return Sample{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); wd.Run(ctx) }()
	<-polled
	<-polled
	cancel()
	<-done
}

// TestNoTargetIsNotAFailure: with no Bark target configured the push
// reaches nobody but fails nowhere, so the watchdog must not retry it on
// every poll (the run log would fill with it).
func TestNoTargetIsNotAFailure(t *testing.T) {
	pushes := 0
	swap, err := NewSwapRule(SwapConfig{Threshold: 0.5, Hysteresis: 0.05, Repeat: time.Minute, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	wd, err := New(Config{
		Read:  func(context.Context) (Sample, error) { return Sample{Swap: swapOf(0.7)}, nil },
		Rules: []Rule{swap},
		Push:  PushFunc(func(context.Context, []Alert) (int, int) { pushes++; return 0, 0 }),
		Now:   func() time.Time { now = now.Add(5 * time.Second); return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 11 { // 55 s: less than the repeat
		wd.Poll(context.Background())
	}
	if pushes != 1 {
		t.Errorf("%d pushes with no target in 55s, want 1", pushes)
	}
}
