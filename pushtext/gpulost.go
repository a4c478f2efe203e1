package pushtext

import (
	"strconv"

	"github.com/lavender-ml/lavender/watchdog"
)

// GPUDeviceFigures describe one GPU's fault from the GPU telemetry.
type GPUDeviceFigures struct {
	Index int
	BusID string // "0000:3b:00"
	Phase string // the phase the GPU served, "" for none known
	Over  bool   // the text of the incident's resolution
}

// GPULost is `GPU 5 (0000:68:00) lost: fallen off the bus — reboot the
// host; phase "Pretrain 1/3" was using it`; its resolution `GPU 5
// (0000:68:00) lost`. Subject "gpu-lost 5".
func GPULost(f GPUDeviceFigures) Text {
	subject := string(watchdog.RuleGPULost) + " " + strconv.Itoa(f.Index)
	head := oneGPU(f.Index, f.BusID) + " lost"
	if f.Over {
		return Text{Body: head, Subject: subject}
	}
	return Text{Body: head + ": fallen off the bus — reboot the host" + usedBy(f.Phase, 1), Subject: subject}
}

func gpuDeviceFigures(a watchdog.Alert) GPUDeviceFigures {
	d := firstDevice(a)
	return GPUDeviceFigures{Index: d.Index, BusID: d.BusID, Phase: a.Phase, Over: a.Status == watchdog.Resolved}
}

func watchdogGPULost(a watchdog.Alert) Text { return GPULost(gpuDeviceFigures(a)) }
