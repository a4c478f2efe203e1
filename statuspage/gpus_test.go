package statuspage

import (
	"errors"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/gpu"
)

// TestGPUSection: the page lists each GPU with its state, the worst first
// (lost, remap pending, thermal, slowdown), its figures, "—" for what NVML
// did not give, and says why when there is no telemetry.
func TestGPUSection(t *testing.T) {
	all := gpu.FieldUtilization | gpu.FieldMemory | gpu.FieldPower | gpu.FieldPowerLimit | gpu.FieldTemperature | gpu.FieldClockEvents | gpu.FieldRemappedRows
	busy := gpu.Device{Index: 0, Name: "NVIDIA H200", BusID: "0000:18:00", Supported: all, SMUtil: 97, MemUsed: 120 << 30, MemTotal: 141 << 30,
		PowerW: 612.4, PowerLimitW: 700, TempC: 61, Pids: []uint32{4242}}
	hot := busy
	hot.Index, hot.BusID, hot.ClockEventReasons = 1, "0000:2a:00", gpu.ClockEventReasons(1<<6) // HW thermal slowdown
	remap := busy
	remap.Index, remap.RemappedRows = 2, gpu.RemappedRows{Pending: true}
	lost := gpu.Device{Index: 3, Name: "NVIDIA H200", BusID: "0000:3a:00", Lost: true}
	bare := gpu.Device{Index: 4, Name: "NVIDIA H200", BusID: "0000:5d:00", Supported: gpu.FieldUtilization, SMUtil: 0}
	if !hot.ClockEventReasons.HWThermalSlowdown() {
		t.Fatal("the test's thermal bit is not NVML's HW thermal slowdown")
	}
	r := newRig(t)
	r.page.cfg.GPUs = func() gpu.Snapshot {
		return gpu.Snapshot{Devices: []gpu.Device{busy, hot, remap, lost, bare}, Err: errors.New("nvmlDeviceGetPowerUsage: unknown error")}
	}
	s := r.page.Snapshot()
	if s.GPUs == nil || len(s.GPUs.Devices) != 5 {
		t.Fatalf("GPU section %+v", s.GPUs)
	}
	for i, want := range []string{"ok", "thermal", "remap pending", "lost", "ok"} {
		if got := s.GPUs.Devices[i].State; got != want {
			t.Errorf("GPU %d: state %q, want %q", i, got, want)
		}
	}
	if d := s.GPUs.Devices[4]; d.MemTotal != nil || d.PowerW != nil || d.TempC != nil || d.SMUtil == nil {
		t.Errorf("a GPU with only utilization: %+v", d)
	}
	html := r.html()
	for _, want := range []string{`<section id="gpus"`, "NVIDIA H200", "97%", "120 GiB / 141 GiB", "612 W", "/ 700 W", "61 °C",
		"⚠ thermal", "⚠ remap pending", "⚠ lost", "last NVML pass failed: nvmlDeviceGetPowerUsage: unknown error"} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	r.page.cfg.GPUs, r.page.cfg.GPUsOff = nil, "built without cgo: GPU telemetry off"
	if html := r.html(); !strings.Contains(html, "built without cgo: GPU telemetry off") || strings.Contains(html, "<th>GPU</th>") {
		t.Error("a page without telemetry does not say why, or shows a table")
	}
	r.page.cfg.GPUsOff = ""
	if html := r.html(); strings.Contains(html, `id="gpus"`) {
		t.Error("a command that reads no GPU shows a GPU section")
	}
}
