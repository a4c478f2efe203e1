package phaseserver

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/phaseapi"
)

// lavender_phase_loss carries the latest loss, NaN and ±Inf as such, and is
// absent until a phase reports one.
func TestPhaseLossMetric(t *testing.T) {
	env := newTestEnv(t)
	loss := func(l float64) *phaseapi.Loss { v := phaseapi.Loss(l); return &v }
	for _, req := range []phaseapi.HeartbeatRequest{
		{Phase: "Pretrain 1/3", Event: phaseapi.EventStart, Loss: loss(2.5)},
		{Phase: "Pretrain 1/3", Event: phaseapi.EventPing, Loss: loss(math.NaN())},
		{Phase: "Finetune", Event: phaseapi.EventStart, Loss: loss(math.Inf(1))},
		{Phase: "Eval", Event: phaseapi.EventStart},
	} {
		if _, err := env.e.Apply(req); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister((*phaseCollector)(env.e))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "lavender_phase_loss" {
			continue
		}
		for _, m := range mf.Metric {
			got[m.Label[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if len(got) != 2 || !math.IsNaN(got["Pretrain 1/3"]) || !math.IsInf(got["Finetune"], 1) {
		t.Errorf("lavender_phase_loss %v; want NaN for Pretrain 1/3, +Inf for Finetune, none for Eval", got)
	}
}
