package pushtext

import (
	"strconv"
	"time"

	"github.com/lavender-ml/lavender/watchdog"
)

// GPUPhaseFigures describe a phase's GPUs that look hung or idle.
type GPUPhaseFigures struct {
	Phase string
	GPUs  []int // indexes
	// UtilPct is the SM utilization: the lowest of the GPUs' for a hang
	// (all at least this busy), the highest for idle GPUs (none busier).
	UtilPct uint32
	// PowerW is the highest power any of the GPUs drew (hang).
	PowerW float64
	// Lasted is how long the GPUs had looked so with no progress.
	Lasted time.Duration
	// NoSteps: the phase reports no progress; the GPUs alone raised it.
	NoSteps bool
	// Over: the text of the incident's resolution.
	Over bool
}

// noStep is what the phase did not do meanwhile.
func (f GPUPhaseFigures) noStep() string {
	if f.NoSteps {
		return " (it reports no steps)"
	}
	return " with no new step"
}

// GPUHang is `phase "Pretrain 1/3": GPUs 0–7 busy at 100% but drawing
// 72 W for 5m with no new step — likely a hung NCCL collective`; for a
// phase that reports no steps "… for 5m (it reports no steps) — …". Its
// resolution reads `phase "Pretrain 1/3": GPUs 0–7 busy at little power`.
// Subject "gpu-hang Pretrain 1/3".
func GPUHang(f GPUPhaseFigures) Text {
	subject := string(watchdog.RuleGPUHang) + " " + phaseName(f.Phase)
	head := "phase " + strconv.Quote(phaseName(f.Phase)) + ": " + gpus(f.GPUs)
	if f.Over {
		return Text{Body: head + " busy at little power", Subject: subject}
	}
	body := head + " busy at " + strconv.FormatUint(uint64(f.UtilPct), 10) + "% but drawing " + watts(f.PowerW) +
		" for " + HumanDuration(f.Lasted) + f.noStep() + " — likely a hung NCCL collective"
	return Text{Body: body, Subject: subject}
}

// gpuPhaseFigures reads the figures off a gpu-hang or gpu-idle alert.
func gpuPhaseFigures(a watchdog.Alert) GPUPhaseFigures {
	f := GPUPhaseFigures{Phase: a.Phase, GPUs: a.GPU.Indexes(), Lasted: a.Lasted(), NoSteps: a.GPU.NoSteps, Over: a.Status == watchdog.Resolved}
	for i, d := range a.GPU.Devices {
		switch {
		case i == 0:
			f.UtilPct, f.PowerW = d.SMUtil, d.PowerW
		case a.Rule == watchdog.RuleGPUHang:
			f.UtilPct, f.PowerW = min(f.UtilPct, d.SMUtil), max(f.PowerW, d.PowerW)
		default:
			f.UtilPct = max(f.UtilPct, d.SMUtil)
		}
	}
	return f
}

func watchdogGPUHang(a watchdog.Alert) Text { return GPUHang(gpuPhaseFigures(a)) }
