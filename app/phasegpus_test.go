package app

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/watchdog"
)

// TestPhaseGPUMetric: lavender_phase_gpu names, for each running phase,
// the GPUs its process or a descendant runs on, as the watchdog's GPU
// hang rule maps them, with the labels of the GPU's own series, so that
// alerts.yml's GPUHung judges a GPU by its phase's progress. A GPU of no
// phase, an ended phase and a pass that failed give no series.
func TestPhaseGPUMetric(t *testing.T) {
	phases := []phaseapi.Phase{
		{Name: "Pretrain", Status: phaseapi.StatusActive, Process: phaseapi.Process{PID: 100}},
		{Name: "Eval", Status: phaseapi.StatusActive, Process: phaseapi.Process{PID: 200}},
		{Name: "Old", Status: phaseapi.StatusFailed, Process: phaseapi.Process{PID: 300}},
	}
	devices := []gpu.Device{
		{Index: 0, UUID: "GPU-a", BusID: "0000:86:00", Pids: []uint32{101}},
		{Index: 1, UUID: "GPU-b", BusID: "0000:87:00", Pids: []uint32{102, 200}},
		{Index: 2, UUID: "GPU-c", BusID: "0000:88:00", Pids: []uint32{999}},
		{Index: 3, UUID: "GPU-d", BusID: "0000:89:00", Pids: []uint32{300}},
	}
	parents := map[int]int{101: 100, 102: 100}
	var readErr error
	c := &phaseGPUCollector{
		phases: func() []phaseapi.Phase { return phases },
		read:   func() ([]gpu.Device, error) { return devices, readErr },
		onGPU: func(p []phaseapi.Phase, d []gpu.Device) map[string][]int {
			return watchdog.PhaseGPUs(p, d, nil, func(pid int) int { return parents[pid] })
		},
	}
	want := `# HELP lavender_phase_gpu 1 for each GPU that a running phase's process, or a descendant of it, runs on (NVML's process lists, matched in the host's pid namespace as serve's watchdog matches them), with the GPU's labels of lavender_gpu_*; absent where that cannot be known.
# TYPE lavender_phase_gpu gauge
lavender_phase_gpu{gpu="0",pci_bus_id="0000:86:00",phase="Pretrain",uuid="GPU-a"} 1
lavender_phase_gpu{gpu="1",pci_bus_id="0000:87:00",phase="Eval",uuid="GPU-b"} 1
lavender_phase_gpu{gpu="1",pci_bus_id="0000:87:00",phase="Pretrain",uuid="GPU-b"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	readErr = errors.New("gpu 1: GetPowerUsage: stuck")
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("%d series from a pass that failed, want none", n)
	}
}
