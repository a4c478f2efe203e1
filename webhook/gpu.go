package webhook

import (
	"strconv"

	"github.com/prometheus/alertmanager/template"

	"github.com/lavender-ml/lavender/pushtext"
)

// The Prometheus alerts on the GPU telemetry (alerts.yml) that the webhook
// words as serve's gpu-lost and gpu-remap pushes, from the collector's
// labels: the GPU's NVML index and its PCI bus id. The others (GPUHung,
// GPUECCErrors, GPUHardwareSlowdown) push their summary, since one alert
// stands for one GPU where serve's push speaks for a phase's GPUs.
const (
	GPULostAlertname         = "GPULost"
	GPURemapPendingAlertname = "GPURowRemapPending"
	GPURemapFailedAlertname  = "GPURowRemapFailed"
	GPUHungAlertname         = "GPUHung"
	GPUECCAlertname          = "GPUECCErrors"
	GPUHardwareSlowAlertname = "GPUHardwareSlowdown"
	labelPCIBusID            = "pci_bus_id"
	maxGPUIndex              = 1 << 12 // far beyond any host's GPUs
)

// gpuTelemetryText is the text of GPULost and the row-remap alerts; ok is
// false for another alert or labels the collector would not have written.
func gpuTelemetryText(name string, a template.Alert) (pushtext.Text, bool) {
	index, err := strconv.Atoi(a.Labels[labelGPU])
	bus := a.Labels[labelPCIBusID]
	if err != nil || index < 0 || index > maxGPUIndex || !pciAddress.MatchString(bus) {
		return pushtext.Text{}, false
	}
	dev := pushtext.GPUDeviceFigures{Index: index, BusID: bus}
	switch name {
	case GPULostAlertname:
		return pushtext.GPULost(dev), true
	case GPURemapPendingAlertname, GPURemapFailedAlertname:
		return pushtext.GPURemap(pushtext.GPURemapFigures{GPUDeviceFigures: dev, Failed: name == GPURemapFailedAlertname}), true
	}
	return pushtext.Text{}, false
}
