package barkbridge

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
)

type fakePusher struct {
	pushed []SwapFigures
	accept bool
}

func (p *fakePusher) PushSwap(_ context.Context, s SwapFigures) (ok, failed int) {
	p.pushed = append(p.pushed, s)
	if p.accept {
		return 1, 0
	}
	return 0, 1
}

// watchdogRig drives a Watchdog through a script of polls on a fake clock.
type watchdogRig struct {
	t      *testing.T
	wd     *Watchdog
	pusher *fakePusher
	now    time.Time
	next   SwapFigures
	err    error
	logs   *bytes.Buffer
}

func newWatchdogRig(t *testing.T, repeat time.Duration) *watchdogRig {
	r := &watchdogRig{t: t, pusher: &fakePusher{accept: true}, now: time.Date(2026, 4, 24, 0, 41, 41, 0, time.UTC), logs: &bytes.Buffer{}}
	cfg := WatchdogConfig{
		Interval: 5 * time.Second, Threshold: 0.5, Repeat: repeat, Hysteresis: 0.05,
		Now: func() time.Time { return r.now },
	}
	read := func(context.Context) (SwapFigures, error) { return r.next, r.err }
	wd, err := NewWatchdog(cfg, read, r.pusher, slog.New(slog.NewTextHandler(r.logs, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r.wd = wd
	return r
}

func gib(f float64) uint64 { return uint64(f * (1 << 30)) }

// poll sets swap to ratio of 32 GiB, advances the clock, polls, and returns
// how many pushes that poll made.
func (r *watchdogRig) poll(after time.Duration, ratio float64) int {
	r.now = r.now.Add(after)
	r.next = SwapFigures{Ratio: ratio, UsedBytes: gib(32 * ratio), TotalBytes: gib(32)}
	before := len(r.pusher.pushed)
	r.wd.Poll(context.Background())
	return len(r.pusher.pushed) - before
}

func TestWatchdogScript(t *testing.T) {
	r := newWatchdogRig(t, time.Minute)
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
		{5 * time.Second, 0.20, 0, "well below: re-armed"},
		{5 * time.Second, 0.60, 1, "a new crossing pushes again"},
		{5 * time.Second, 0.50, 0, "exactly at the threshold, already pushed"},
	}
	for i, s := range steps {
		if got := r.poll(s.after, s.ratio); got != s.want {
			t.Fatalf("step %d (%s): %d pushes, want %d", i, s.why, got, s.want)
		}
	}
	if got := r.pusher.pushed[0]; got.Ratio != 0.54 || got.TotalBytes != gib(32) {
		t.Errorf("first push carried %+v", got)
	}
	if got := testutil.ToFloat64(r.wd.polls); got != float64(len(steps)) {
		t.Errorf("polls_total %v, want %d", got, len(steps))
	}
}

func TestWatchdogExactlyAtThreshold(t *testing.T) {
	r := newWatchdogRig(t, 0)
	if got := r.poll(0, 0.5); got != 1 {
		t.Errorf("50%% exactly: %d pushes, want 1 (the rule is used >= threshold)", got)
	}
	if got := r.poll(time.Hour, 0.9); got != 0 {
		t.Errorf("repeat 0 means no reminders, got %d pushes", got)
	}
}

func TestWatchdogNoSwapNeverPushes(t *testing.T) {
	r := newWatchdogRig(t, time.Second)
	for i := range 5 {
		r.now = r.now.Add(time.Minute)
		r.next = SwapFigures{} // no swap: total 0, ratio 0
		r.wd.Poll(context.Background())
		if n := len(r.pusher.pushed); n != 0 {
			t.Fatalf("poll %d: %d pushes on a host with no swap", i, n)
		}
	}
}

func TestWatchdogRetriesWithBackoffWhenEveryTargetFails(t *testing.T) {
	r := newWatchdogRig(t, time.Minute)
	r.pusher.accept = false
	// Every 5s: push at 0s fails, retry at 5s, then after 10s (15s), then
	// after 20s (35s), then after 40s (75s).
	want := []int{1, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}
	for i, w := range want {
		after := 5 * time.Second
		if i == 0 {
			after = 0
		}
		if got := r.poll(after, 0.7); got != w {
			t.Fatalf("poll %d: %d pushes, want %d", i, got, w)
		}
	}
	r.pusher.accept = true
	if got := r.poll(5*time.Second, 0.7); got != 1 {
		t.Fatalf("the retry at 75s: %d pushes, want 1", got)
	}
	if got := r.poll(5*time.Second, 0.7); got != 0 {
		t.Errorf("after a push got through, the watchdog must wait for repeat; got %d pushes", got)
	}
}

func TestWatchdogReadErrors(t *testing.T) {
	r := newWatchdogRig(t, time.Minute)
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
	}
	if got := testutil.ToFloat64(r.wd.errs); got != 3 {
		t.Errorf("errors_total %v, want 3", got)
	}
	if len(r.pusher.pushed) != 0 {
		t.Error("a failed read must not push")
	}
	r.err = nil
	if got := r.poll(0, 0.6); got != 1 {
		t.Errorf("after errors the watchdog must keep working: %d pushes", got)
	}
}

func TestWatchdogConfigErrors(t *testing.T) {
	ok := WatchdogConfig{Interval: time.Second, Threshold: 0.5, Repeat: time.Minute, Hysteresis: 0.05}
	for _, tc := range []struct {
		name   string
		change func(*WatchdogConfig)
		want   string
	}{
		{"zero interval", func(c *WatchdogConfig) { c.Interval = 0 }, "interval"},
		{"threshold above 1", func(c *WatchdogConfig) { c.Threshold = 1.5 }, "threshold"},
		{"threshold zero", func(c *WatchdogConfig) { c.Threshold = 0 }, "threshold"},
		{"negative repeat", func(c *WatchdogConfig) { c.Repeat = -time.Second }, "repeat"},
		{"hysteresis past the threshold", func(c *WatchdogConfig) { c.Hysteresis = 0.5 }, "hysteresis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.change(&cfg)
			_, err := NewWatchdog(cfg, nil, nil, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one about %s", err, tc.want)
			}
		})
	}
}

// armedProbe records the armed gauge at the moment of each push.
type armedProbe struct {
	wd     **Watchdog
	atPush []float64
}

func (p *armedProbe) PushSwap(context.Context, SwapFigures) (int, int) {
	p.atPush = append(p.atPush, testutil.ToFloat64((*p.wd).armedGauge))
	return 1, 0
}

func TestWatchdogDisarmedBeforeThePushLeaves(t *testing.T) {
	var wd *Watchdog
	probe := &armedProbe{wd: &wd}
	read := func(context.Context) (SwapFigures, error) {
		return SwapFigures{Ratio: 0.6, UsedBytes: gib(19.2), TotalBytes: gib(32)}, nil
	}
	var err error
	wd, err = NewWatchdog(WatchdogConfig{Interval: time.Second, Threshold: 0.5, Repeat: time.Hour, Hysteresis: 0.05}, read, probe, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wd.Poll(context.Background())
	if len(probe.atPush) != 1 || probe.atPush[0] != 0 {
		t.Errorf("armed gauge at push time: %v, want [0]: a watcher that sees the push must not see it armed", probe.atPush)
	}
}
