package statuspage

import (
	"github.com/lavender-ml/lavender/gpu"
)

// GPUs is the page's GPU section: each GPU of the last NVML pass, or why
// there is no telemetry (a build without cgo, no driver, no GPU).
type GPUs struct {
	Off     string `json:"off,omitempty"`   // why telemetry is off; "" when on
	Error   string `json:"error,omitempty"` // the last pass failed
	Devices []GPU  `json:"devices,omitempty"`
}

// GPU is one GPU as the page shows it; a figure NVML did not give is nil.
type GPU struct {
	Index       int      `json:"index"`
	Name        string   `json:"name"`
	BusID       string   `json:"pci_bus_id"`
	State       string   `json:"state"` // "ok", "lost", "slowdown", "thermal", "remap pending", "error"
	SMUtil      *float64 `json:"sm_utilization_ratio,omitempty"`
	MemUsed     *uint64  `json:"memory_used_bytes,omitempty"`
	MemTotal    *uint64  `json:"memory_total_bytes,omitempty"`
	PowerW      *float64 `json:"power_watts,omitempty"`
	PowerLimitW *float64 `json:"power_limit_watts,omitempty"`
	TempC       *float64 `json:"temperature_celsius,omitempty"`
	Processes   int      `json:"processes"`
}

// MemRatio is the share of memory in use, for the bar; 0 when unknown.
func (g GPU) MemRatio() float64 {
	if g.MemUsed == nil || g.MemTotal == nil || *g.MemTotal == 0 {
		return 0
	}
	return float64(*g.MemUsed) / float64(*g.MemTotal)
}

// newGPUs is the section of snapshot s; off is why telemetry is off.
func newGPUs(s gpu.Snapshot, off string) GPUs {
	if off != "" {
		return GPUs{Off: off}
	}
	out := GPUs{}
	if s.Err != nil {
		out.Error = s.Err.Error()
	}
	for _, d := range s.Devices {
		out.Devices = append(out.Devices, newGPU(d))
	}
	return out
}

func newGPU(d gpu.Device) GPU {
	g := GPU{Index: d.Index, Name: d.Name, BusID: d.BusID, State: gpuState(d), Processes: len(d.Pids)}
	if d.Lost {
		return g
	}
	has := d.Has
	if has(gpu.FieldUtilization) {
		u := float64(d.SMUtil) / 100
		g.SMUtil = &u
	}
	if has(gpu.FieldMemory) {
		used, total := d.MemUsed, d.MemTotal
		g.MemUsed, g.MemTotal = &used, &total
	}
	if has(gpu.FieldPower) {
		w := d.PowerW
		g.PowerW = &w
	}
	if has(gpu.FieldPowerLimit) {
		w := d.PowerLimitW
		g.PowerLimitW = &w
	}
	if has(gpu.FieldTemperature) {
		c := float64(d.TempC)
		g.TempC = &c
	}
	return g
}

// gpuState is the word the page shows for d, the worst first.
func gpuState(d gpu.Device) string {
	switch {
	case d.Lost:
		return "lost"
	case d.Err != nil:
		return "error"
	case d.Has(gpu.FieldRemappedRows) && (d.RemappedRows.Pending || d.RemappedRows.Failed):
		return "remap pending"
	case d.Has(gpu.FieldClockEvents) && (d.ClockEventReasons.HWThermalSlowdown() || d.ClockEventReasons.SWThermalSlowdown()):
		return "thermal"
	case d.Has(gpu.FieldClockEvents) && (d.ClockEventReasons.HWSlowdown() || d.ClockEventReasons.HWPowerBrakeSlowdown()):
		return "slowdown"
	}
	return "ok"
}
