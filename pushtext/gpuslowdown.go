package pushtext

import (
	"fmt"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/watchdog"
)

// GPUSlowdownFigures describe GPUs the hardware slowed for minutes.
type GPUSlowdownFigures struct {
	GPUs    []int
	Reasons gpu.ClockEventReasons // the hardware reasons, of all of them
	MaxTemp uint32                // °C, the hottest of them; 0: unknown
	Lasted  time.Duration
	Phase   string
	Over    bool
}

// GPUSlowdown is `GPUs 0–3 slowed by the hardware for 3m (thermal, up to
// 92 °C) — check the cooling; phase "Pretrain 1/3" was using them`; the
// power brake reads "(power brake) — check the power supply", a slowdown
// the GPU gives no reason for "(HW slowdown) — check the cooling and the
// power supply". Its resolution reads `GPUs 0–3 slowed by the hardware`.
// Subject "gpu-slowdown 0–3".
func GPUSlowdown(f GPUSlowdownFigures) Text {
	subject := string(watchdog.RuleGPUSlowdown) + " " + GPURange(f.GPUs)
	head := gpus(f.GPUs) + " slowed by the hardware"
	if f.Over {
		return Text{Body: head, Subject: subject}
	}
	var why, advice []string
	if f.Reasons.HWThermalSlowdown() {
		w := "thermal"
		if f.MaxTemp > 0 {
			w += fmt.Sprintf(", up to %d °C", f.MaxTemp)
		}
		why, advice = append(why, w), append(advice, "the cooling")
	}
	if f.Reasons.HWPowerBrakeSlowdown() {
		why, advice = append(why, "power brake"), append(advice, "the power supply")
	}
	if len(why) == 0 {
		why, advice = []string{"HW slowdown"}, []string{"the cooling", "the power supply"}
	}
	body := fmt.Sprintf("%s for %s (%s) — check %s", head, HumanDuration(f.Lasted), strings.Join(why, "; "), strings.Join(advice, " and "))
	return Text{Body: body + usedBy(f.Phase, len(f.GPUs)), Subject: subject}
}

func watchdogGPUSlowdown(a watchdog.Alert) Text {
	f := GPUSlowdownFigures{GPUs: a.GPU.Indexes(), Lasted: a.Lasted(), Phase: a.Phase, Over: a.Status == watchdog.Resolved}
	for _, d := range a.GPU.Devices {
		f.Reasons |= d.ClockEventReasons & (gpu.ReasonHWSlowdown | gpu.ReasonHWThermalSlowdown | gpu.ReasonHWPowerBrakeSlowdown)
		if d.ClockEventReasons.HWThermalSlowdown() && d.Has(gpu.FieldTemperature) {
			f.MaxTemp = max(f.MaxTemp, d.TempC)
		}
	}
	return GPUSlowdown(f)
}
