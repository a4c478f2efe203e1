package barkbridge

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"

	"lavender/internal/barktest"
	"lavender/internal/testkit"
	"lavender/phaseapi"
	"lavender/pushtext"
	"lavender/watchdog"
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
			if ok, failed := f.bridge.Push(t.Context(), tt.alerts); ok != 1 || failed != 0 {
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
			line := "15:04:05 " + runlogLine(subject(pushtext.Phase(p).Subject), 123, 4567)
			if len(line) > 80 || !strings.HasSuffix(line, "… sent ok=123 fail=4567") || !strings.HasPrefix(line, "15:04:05 BARK "+string(event)+" ") {
				t.Errorf("%s: run-log line %q (%d bytes)", event, line, len(line))
			}
			if text := pushtext.Phase(p).Body; len(name) > maxPhaseBytes && !strings.Contains(text, "…\" ") || len(text) > 200 {
				t.Errorf("%s: push %q: a phase name is cut to %d bytes", event, text, maxPhaseBytes)
			}
		}
	}
}

// TestWebhookPhaseAlerts: PhaseFailed, PhaseStalled, PhaseProgressStalled
// and PhaseLossNotFinite reach the phone in the watchdog's words, through
// the webhook, with the watchdog's run-log lines; odd annotations fall back
// to the summary; the resolution of PhaseFailed, PhaseLossNotFinite and
// OOMKill is skipped even with --bark.send-resolved,
// while a stall's resolution is still pushed.
func TestWebhookPhaseAlerts(t *testing.T) {
	const summary = `[lavender-2] PhaseFailed: Phase "Pretrain 1/3" on gpu-box:9877 failed after 4h 12m 0s`
	const stallSummary = `[lavender-2] PhaseProgressStalled: Phase "Pretrain 1/3" on gpu-box:9877 is stuck at step 1200 for 10m 30s`
	tests := []struct {
		file   string
		answer string
		bodies []string
		lines  []string
	}{
		{"firing_phase_failed.json", "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{`[lavender-2] phase "Pretrain 1/3" failed after 4h12m: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB`},
			[]string{"BARK failed Pretrain 1/3 sent ok=1 fail=0"}},
		{"firing_phase_stalled.json", "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{`[lavender-2] phase "Pretrain 1/3" stalled: no heartbeat for 10m`},
			[]string{"BARK stalled Pretrain 1/3 sent ok=1 fail=0"}},
		{"non_swap.json", "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n", // PhaseStalled without its figures
			[]string{"[lavender-2] PhaseStalled: no heartbeat for 15m in Pretrain 1/3"},
			[]string{"BARK PhaseStalled sent ok=1 fail=0"}},
		{"firing_phase_progress_stalled.json", "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{`[lavender-2] phase "Pretrain 1/3" stalled: step 1200/5000 for 10m`},
			[]string{"BARK stalled Pretrain 1/3 sent ok=1 fail=0"}},
		{"firing_phase_progress_stalled_no_total.json", "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{`[lavender-2] phase "Pretrain 1/3" stalled: step 1200 for 10m`},
			[]string{"BARK stalled Pretrain 1/3 sent ok=1 fail=0"}},
		{"firing_phase_long_name.json", "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{`[lavender-2] phase "Pretrain with a rather long name, epoch 3 of 12, shard 7 of 8" failed after 4h12m`},
			[]string{"BARK failed Pretrain with a rather long na… sent ok=1 fail=0"}},
		{"firing_phase_odd_annotations.json", "alerts=6 pushed=6 failed=0 skipped=0 duplicate=0\n",
			[]string{summary, summary, summary, stallSummary, stallSummary,
				`[lavender-2] phase "Pretrain 1/3" stalled: step 1200 for 10m`},
			[]string{"BARK PhaseFailed sent ok=1 fail=0", "BARK PhaseFailed sent ok=1 fail=0", "BARK PhaseFailed sent ok=1 fail=0",
				"BARK PhaseProgressStalled sent ok=1 fail=0", "BARK PhaseProgressStalled sent ok=1 fail=0",
				"BARK stalled Pretrain 1/3 sent ok=1 fail=0"}},
		{"firing_phase_loss.json", "alerts=4 pushed=4 failed=0 skipped=0 duplicate=0\n",
			[]string{`[lavender-2] phase "Pretrain 1/3" loss is NaN at step 1200/5000 — training diverged`,
				`[lavender-2] phase "DPO" loss is -Inf — training diverged`,
				`[lavender-2] phase "SFT" loss is +Inf at step 300 — training diverged`,
				`[lavender-2] PhaseLossNotFinite: Phase "Eval" on gpu-box:9877: loss is 2.5`},
			[]string{"BARK loss Pretrain 1/3 sent ok=1 fail=0", "BARK loss DPO sent ok=1 fail=0", "BARK loss SFT sent ok=1 fail=0",
				"BARK PhaseLossNotFinite sent ok=1 fail=0"}},
		{"resolved_phase_loss.json", "alerts=1 pushed=0 failed=0 skipped=1 duplicate=0\n", nil, nil},
		{"resolved_phase_failed.json", "alerts=1 pushed=0 failed=0 skipped=1 duplicate=0\n", nil, nil},
		{"resolved_oom.json", "alerts=1 pushed=0 failed=0 skipped=1 duplicate=0\n", nil, nil},
		{"resolved_phase_progress_stalled.json", "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] resolved: PhaseProgressStalled after 5m"},
			[]string{"BARK resolved PhaseProgressStalled sent ok=1 fail=0"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := barktest.New(t, "KEY")
			f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, func(c *Config) { c.SendResolved = true })
			code, answer := f.post(readTestdata(t, tt.file))
			if code != 200 || answer != tt.answer {
				t.Errorf("webhook answered %d %q, want 200 %q", code, answer, tt.answer)
			}
			bodies := sortedBodies(srv)
			want := slices.Sorted(slices.Values(tt.bodies))
			if !slices.Equal(bodies, want) {
				t.Errorf("pushed\n%q\nwant\n%q", bodies, want)
			}
			lines := f.barkLines()
			slices.Sort(lines)
			if wantLines := slices.Sorted(slices.Values(tt.lines)); !slices.Equal(lines, wantLines) {
				t.Errorf("run log\n%q\nwant\n%q", lines, wantLines)
			}
		})
	}
	t.Run("skipped resolutions are counted", func(t *testing.T) {
		f := newFixture(t, nil, func(c *Config) { c.SendResolved = true })
		f.post(readTestdata(t, "resolved_phase_failed.json"))
		f.post(readTestdata(t, "resolved_oom.json"))
		if v := f.metrics().MustValue(t, "lavender_webhook_alerts_total", testkit.Labels{"status": "resolved", "action": "skipped"}); v != 2 {
			t.Errorf("resolved skipped = %v, want 2", v)
		}
	})
}

// TestLossFromAnnotations: only what Prometheus prints for a non-finite
// value is a diverged loss; a step without a total, or a total below the
// step, is told without the total.
func TestLossFromAnnotations(t *testing.T) {
	for _, tc := range []struct {
		loss, step, total string
		ok                bool
		want              string
	}{
		{"NaN", "1200", "5000", true, `phase "P" loss is NaN at step 1200/5000 — training diverged`},
		{" nan ", "", "", true, `phase "P" loss is NaN — training diverged`},
		{"Inf", "7", "", true, `phase "P" loss is +Inf at step 7 — training diverged`},
		{"-Inf", "9", "3", true, `phase "P" loss is -Inf at step 9 — training diverged`},
		{"2.5", "1", "2", false, ""},
		{"Infinity", "", "", false, ""},
		{"0x1p-1", "", "", false, ""},
		{"", "", "", false, ""},
	} {
		l, ok := lossFromAnnotations(template.KV{"phase": "P", "loss": tc.loss, "step": tc.step, "total_steps": tc.total})
		if ok != tc.ok || (ok && pushtext.Loss(l).Body != tc.want) {
			t.Errorf("loss %q step %q total %q: %v %q, want %v %q", tc.loss, tc.step, tc.total, ok, pushtext.Loss(l).Body, tc.ok, tc.want)
		}
	}
	if _, ok := lossFromAnnotations(template.KV{"loss": "NaN"}); ok {
		t.Error("a loss without a phase was read")
	}
}
