package watchpush

import (
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/watchdog"
)

const pretrain = "Pretrain 1/3"

// endedPhaseAlert is a failed or done rule's alert for a phase that ran
// for lasted and ended at pushedAt.
func endedPhaseAlert(rule watchdog.RuleName, name string, lasted time.Duration) watchdog.Alert {
	status := phaseapi.StatusFailed
	if rule == watchdog.RuleDone {
		status = phaseapi.StatusOK
	}
	began := pushedAt.Add(-lasted)
	return watchdog.Alert{Rule: rule, Status: watchdog.Firing, Incident: name, Began: began, At: pushedAt.Add(20 * time.Millisecond), Phase: name,
		Sample: watchdog.Sample{Phases: []phaseapi.Phase{{Name: name, Status: status, Started: began, Ended: pushedAt, LastHeartbeat: pushedAt}}}}
}

// silentPhaseAlert is the stalled rule's alert for a phase whose last
// heartbeat is lasted old.
func silentPhaseAlert(name string, lasted time.Duration) watchdog.Alert {
	beat, step := pushedAt.Add(-lasted), uint64(1200)
	return watchdog.Alert{Rule: watchdog.RuleStalled, Status: watchdog.Firing, Incident: name, Began: beat, At: pushedAt, Phase: name, Stall: watchdog.StallHeartbeat,
		Sample: watchdog.Sample{Phases: []phaseapi.Phase{{Name: name, Status: phaseapi.StatusActive, Started: beat.Add(-time.Hour),
			LastHeartbeat: beat, Progress: phaseapi.Progress{Step: &step, Total: 5000, ProgressAt: beat}}}}}
}

// stuckPhaseAlert is the stalled rule's alert for a phase that pings on
// while its step has not moved for lasted.
func stuckPhaseAlert(name string, step, total uint64, lasted time.Duration) watchdog.Alert {
	moved := pushedAt.Add(-lasted)
	return watchdog.Alert{Rule: watchdog.RuleStalled, Status: watchdog.Firing, Incident: name, Began: moved, At: pushedAt, Phase: name, Stall: watchdog.StallStep,
		Sample: watchdog.Sample{Phases: []phaseapi.Phase{{Name: name, Status: phaseapi.StatusActive, Started: moved.Add(-time.Hour),
			LastHeartbeat: pushedAt.Add(-30 * time.Second), Progress: phaseapi.Progress{Step: &step, Total: total, ProgressAt: moved}}}}}
}

// TestPushPhaseTexts: every phase text (failed, stalled, step stalled,
// done), through the real sender, a Bark-compatible server and the run log.
func TestPushPhaseTexts(t *testing.T) {
	long := strings.Repeat("Pretrain on the full corpus ", 2) + "1/3" // 59 bytes: the line must shorten it
	tests := []struct {
		name   string
		alerts []watchdog.Alert
		body   string
		line   string
	}{
		{"failed", []watchdog.Alert{endedPhaseAlert(watchdog.RuleFailed, pretrain, 4*time.Hour+12*time.Minute+31*time.Second)},
			`[lavender-2] phase "Pretrain 1/3" failed after 4h12m`,
			"BARK failed Pretrain 1/3 sent ok=1 fail=0"},
		{"failed within a minute", []watchdog.Alert{endedPhaseAlert(watchdog.RuleFailed, pretrain, 45*time.Second)},
			`[lavender-2] phase "Pretrain 1/3" failed after 45s`,
			"BARK failed Pretrain 1/3 sent ok=1 fail=0"},
		{"stalled without heartbeats", []watchdog.Alert{silentPhaseAlert(pretrain, 10*time.Minute+20*time.Second)},
			`[lavender-2] phase "Pretrain 1/3" stalled: no heartbeat for 10m`,
			"BARK stalled Pretrain 1/3 sent ok=1 fail=0"},
		{"stalled on its step", []watchdog.Alert{stuckPhaseAlert(pretrain, 1200, 5000, 10*time.Minute)},
			`[lavender-2] phase "Pretrain 1/3" stalled: step 1200/5000 for 10m`,
			"BARK stalled Pretrain 1/3 sent ok=1 fail=0"},
		{"stalled on its step, no total", []watchdog.Alert{stuckPhaseAlert(pretrain, 1200, 0, 10*time.Minute)},
			`[lavender-2] phase "Pretrain 1/3" stalled: step 1200 for 10m`,
			"BARK stalled Pretrain 1/3 sent ok=1 fail=0"},
		{"done", []watchdog.Alert{endedPhaseAlert(watchdog.RuleDone, pretrain, 4*time.Hour+12*time.Minute)},
			`[lavender-2] phase "Pretrain 1/3" done in 4h12m`,
			"BARK done Pretrain 1/3 sent ok=1 fail=0"},
		{"done after days", []watchdog.Alert{endedPhaseAlert(watchdog.RuleDone, pretrain, 50*time.Hour+59*time.Minute)},
			`[lavender-2] phase "Pretrain 1/3" done in 2d2h`,
			"BARK done Pretrain 1/3 sent ok=1 fail=0"},
		{"a long name: whole in the push, shortened in the run log", []watchdog.Alert{endedPhaseAlert(watchdog.RuleFailed, long, time.Hour)},
			`[lavender-2] phase "` + long + `" failed after 1h`,
			"BARK failed Pretrain on the full corpus Pr… sent ok=1 fail=0"},
		{"a name with quotes and a newline", []watchdog.Alert{endedPhaseAlert(watchdog.RuleFailed, "SFT \"v2\"\nrun", time.Minute)},
			`[lavender-2] phase "SFT \"v2\" run" failed after 1m`,
			`BARK failed SFT "v2" run sent ok=1 fail=0`},
		{"two phases in one poll", []watchdog.Alert{
			endedPhaseAlert(watchdog.RuleFailed, pretrain, 4*time.Hour+12*time.Minute),
			stuckPhaseAlert("Eval", 30, 40, 12*time.Minute),
		},
			`[lavender-2] phase "Pretrain 1/3" failed after 4h12m; phase "Eval" stalled: step 30/40 for 12m`,
			"BARK failed Pretrain 1/3 + stalled Eval sent ok=1 fail=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := barktest.New(t, "KEY")
			f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, nil)
			if ok, failed := f.pusher.Push(t.Context(), tt.alerts); ok != 1 || failed != 0 {
				t.Errorf("Push = %d, %d, want 1, 0", ok, failed)
			}
			if got := srv.Pushes(); len(got) != 1 || got[0].Body != tt.body {
				t.Fatalf("pushed %+v\nwant one push of %q", got, tt.body)
			}
			lines := f.barkLines()
			if len(lines) != 1 || lines[0] != tt.line {
				t.Errorf("run log %q, want [%q]", lines, tt.line)
			}
			for _, l := range lines {
				if len("15:04:05 "+l) > 80 {
					t.Errorf("run-log line %q is over 80 bytes", l)
				}
			}
		})
	}
}

// TestPhaseLineKeepsItsTail: the longest phase name the exporter takes,
// and the longest an annotation could carry, shorten in the run log with
// "…" while "sent ok= fail=" stays whole, with many targets too.
func TestPhaseLineKeepsItsTail(t *testing.T) {
	const maxPhaseBytes = 64 // the longest phase name a push shows
	for _, name := range []string{strings.Repeat("x", 64), strings.Repeat("ü", 300)} {
		for _, event := range []watchdog.RuleName{watchdog.RuleFailed, watchdog.RuleStalled, watchdog.RuleDone} {
			p := pushtext.PhaseFigures{Event: event, Phase: name, Duration: time.Hour}
			line := "15:04:05 " + delivery.RunlogLine(delivery.Subject(pushtext.Phase(p).Subject), 123, 4567)
			if len(line) > 80 || !strings.HasSuffix(line, "… sent ok=123 fail=4567") || !strings.HasPrefix(line, "15:04:05 BARK "+string(event)+" ") {
				t.Errorf("%s: run-log line %q (%d bytes)", event, line, len(line))
			}
			if text := pushtext.Phase(p).Body; len(name) > maxPhaseBytes && !strings.Contains(text, "…\" ") || len(text) > 200 {
				t.Errorf("%s: push %q: a phase name is cut to %d bytes", event, text, maxPhaseBytes)
			}
		}
	}
}
