package pushtext

import (
	"strconv"
	"time"

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

// NVMLStuck is `NVML has not answered for 1m: a GPU or the driver is
// stuck — look for an Xid in the kernel log (79: a GPU fell off the bus);
// the GPU readings and rules wait for it`; its resolution `NVML stopped
// answering`. Subject "gpu-lost nvml".
func NVMLStuck(stuck time.Duration, over bool) Text {
	subject := string(watchdog.RuleGPULost) + " " + watchdog.GPUStuckIncident
	if over {
		return Text{Body: "NVML stopped answering", Subject: subject}
	}
	return Text{Body: "NVML has not answered for " + HumanDuration(stuck) +
		": a GPU or the driver is stuck — look for an Xid in the kernel log (79: a GPU fell off the bus); the GPU readings and rules wait for it",
		Subject: subject}
}

func gpuDeviceFigures(a watchdog.Alert) GPUDeviceFigures {
	d := firstDevice(a)
	return GPUDeviceFigures{Index: d.Index, BusID: d.BusID, Phase: a.Phase, Over: a.Status == watchdog.Resolved}
}

func watchdogGPULost(a watchdog.Alert) Text {
	if a.Incident == watchdog.GPUStuckIncident {
		return NVMLStuck(a.GPU.Stuck, a.Status == watchdog.Resolved)
	}
	return GPULost(gpuDeviceFigures(a))
}
