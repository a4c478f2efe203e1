package pushtext

import (
	"math"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/watchdog"
)

func TestLoss(t *testing.T) {
	for _, tc := range []struct {
		l    LossFigures
		want string
	}{
		{LossFigures{Phase: "Pretrain 1/3", Loss: math.NaN(), HasStep: true, Step: 1200, Total: 5000},
			`phase "Pretrain 1/3" loss is NaN at step 1200/5000 — training diverged`},
		{LossFigures{Phase: "Finetune", Loss: math.Inf(1), HasStep: true, Step: 12},
			`phase "Finetune" loss is +Inf at step 12 — training diverged`},
		{LossFigures{Phase: "DPO", Loss: math.Inf(-1)}, `phase "DPO" loss is -Inf — training diverged`},
		{LossFigures{Phase: "a\nb", Loss: math.NaN()}, `phase "a b" loss is NaN — training diverged`},
	} {
		got := Loss(tc.l)
		if got.Body != tc.want || got.Subject != "loss "+phaseName(tc.l.Phase) {
			t.Errorf("%+v: %q / %q, want %q", tc.l, got.Body, got.Subject, tc.want)
		}
	}
	// The watchdog's alert reads its figures from the sample that raised it.
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	step, loss := uint64(7), phaseapi.Loss(math.NaN())
	p := phaseapi.Phase{Name: "Pretrain 1/3", Status: phaseapi.StatusActive, Progress: phaseapi.Progress{Step: &step, Total: 9}, Work: phaseapi.Work{Loss: &loss}}
	a := watchdog.Alert{Rule: watchdog.RuleLoss, Status: watchdog.Firing, Phase: p.Name, At: now, Began: now,
		Sample: watchdog.Sample{Time: now, Phases: []phaseapi.Phase{p}}}
	if got := Alert(a).Body; got != `phase "Pretrain 1/3" loss is NaN at step 7/9 — training diverged` {
		t.Errorf("alert text %q", got)
	}
}
