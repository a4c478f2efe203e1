package webhook

import (
	"slices"
	"testing"

	"github.com/prometheus/alertmanager/template"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/pushtext"
)

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
		// alerts.yml's step for a phase that told its total and hangs
		// before its first step: 0, as the watchdog counts from the start.
		{"firing_phase_progress_stalled_before_first_step.json", "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{`[lavender-2] phase "Pretrain 1/3" stalled: step 0/5000 for 10m`},
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
			f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, func(c *fixtureConfig) { c.SendResolved = true })
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
		f := newFixture(t, nil, func(c *fixtureConfig) { c.SendResolved = true })
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
