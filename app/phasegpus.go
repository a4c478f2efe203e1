package app

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/phaseserver"
)

var phaseGPUDesc = prometheus.NewDesc("lavender_phase_gpu",
	"1 for each GPU that a running phase's process, or a descendant of it, runs on (NVML's process lists, matched in the host's pid namespace as serve's watchdog matches them), with the GPU's labels of lavender_gpu_*; absent where that cannot be known.",
	[]string{"phase", "gpu", "uuid", "pci_bus_id"}, nil)

// phaseGPUCollector exports which GPUs each running phase uses, as the
// watchdog's GPU hang rule reads them (Sample.PhaseGPUs), so that
// alerts.yml's GPUHung judges a GPU by its phase's progress as the rule
// does. It maps at scrape time, from the GPU reader's cached pass: the
// exporter has no watchdog, and serve's may be off.
type phaseGPUCollector struct {
	phases func() []phaseapi.Phase
	read   func() ([]gpu.Device, error)
	onGPU  func([]phaseapi.Phase, []gpu.Device) map[string][]int
}

func newPhaseGPUCollector(procfs string, exp *phaseserver.Server, g *gpus) *phaseGPUCollector {
	return &phaseGPUCollector{
		phases: func() []phaseapi.Phase { _, p := exp.Snapshot(); return p },
		read:   g.read,
		onGPU:  phaseGPUs(procfs),
	}
}

func (c *phaseGPUCollector) Describe(ch chan<- *prometheus.Desc) { ch <- phaseGPUDesc }

// Collect sends nothing when the GPUs were not read (telemetry off, a
// failed or stuck pass): no phase's GPUs are known then.
func (c *phaseGPUCollector) Collect(ch chan<- prometheus.Metric) {
	devices, err := c.read()
	if err != nil || len(devices) == 0 {
		return
	}
	byPhase := c.onGPU(c.phases(), devices)
	names := make([]string, 0, len(byPhase))
	for name := range byPhase {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, i := range byPhase[name] {
			for _, d := range devices {
				if d.Index == i {
					ch <- prometheus.MustNewConstMetric(phaseGPUDesc, prometheus.GaugeValue, 1, name, strconv.Itoa(d.Index), d.UUID, d.BusID)
					break
				}
			}
		}
	}
}
