package phaseserver

import (
	"maps"
	"math"
	"testing"
	"time"

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

// The times an evaluation and work between steps (busy) last moved are on
// /metrics, each absent until the phase reports it, so that Prometheus'
// PhaseProgressStalled counts them as movement as the watchdog does.
func TestPhaseWorkTimestampMetrics(t *testing.T) {
	env := newTestEnv(t)
	evalStep := uint64(3)
	for _, req := range []phaseapi.HeartbeatRequest{
		{Phase: "Finetune", Event: phaseapi.EventStart},
		{Phase: "Eval", Event: phaseapi.EventStart},
		{Phase: "Plain", Event: phaseapi.EventStart},
	} {
		if _, err := env.e.Apply(req); err != nil {
			t.Fatal(err)
		}
	}
	env.clock.Advance(time.Minute)
	if _, err := env.e.Apply(phaseapi.HeartbeatRequest{Phase: "Eval", Event: phaseapi.EventPing, EvalStep: &evalStep}); err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(time.Minute)
	if _, err := env.e.Apply(phaseapi.HeartbeatRequest{Phase: "Finetune", Event: phaseapi.EventPing, Busy: "saving"}); err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(time.Minute)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister((*phaseCollector)(env.e))
	for name, want := range map[string]map[string]float64{
		"lavender_phase_last_eval_progress_timestamp_seconds": {"Eval": unixSeconds(t0.Add(time.Minute))},
		"lavender_phase_last_busy_timestamp_seconds":          {"Finetune": unixSeconds(t0.Add(2 * time.Minute))},
	} {
		got := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.Metric {
					got[m.Label[0].GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s %v, want %v", name, got, want)
		}
	}
}
