package webhook

import (
	"strconv"
	"strings"

	"github.com/prometheus/alertmanager/template"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/pushtext"
)

// The Prometheus alerts on the kernel log's faults (alerts.yml), which the
// bridge words as the watchdog's gpu and disk pushes: their labels carry
// the GPU and Xid, the device and kind; active_phase the phase running.
const (
	GPUXidAlertname        = "GPUXidError"
	GPUFallenOffAlertname  = "GPUFallenOffBus"
	StorageErrorsAlertname = "StorageErrors"

	labelGPU    = "gpu"
	labelXid    = "xid"
	labelDevice = "device"
	labelKind   = "kind"
)

// pciAddress and kernelDevice are what the exporter puts in those labels;
// anything else is not worded as a fault.
var (
	pciAddress   = lazyregexp.New(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}$`)
	kernelDevice = lazyregexp.New(`^[A-Za-z0-9_.:-]{1,32}$`)
)

// kernelFaultText is the text of GPUXidError, GPUFallenOffBus and
// StorageErrors, the watchdog's words without the process (Prometheus
// does not know it); ok is false for another alert or labels the exporter
// would not have written.
func kernelFaultText(name string, a template.Alert) (pushtext.Text, bool) {
	phase := strings.TrimSpace(a.Annotations[annotationActivePhase])
	switch name {
	case GPUXidAlertname, GPUFallenOffAlertname:
		gpu := a.Labels[labelGPU]
		if !pciAddress.MatchString(gpu) {
			return pushtext.Text{}, false
		}
		// The counter the alert is on has no record: an Xid whose record
		// states its action is told to look there (NoRecord).
		g := pushtext.GPUFigures{GPU: gpu, Phase: phase, NoRecord: true}
		if name == GPUXidAlertname {
			xid, err := strconv.Atoi(a.Labels[labelXid])
			if err != nil || xid <= 0 {
				return pushtext.Text{}, false
			}
			g.Xid = xid
		}
		return pushtext.GPU(g), true
	case StorageErrorsAlertname:
		dev, kind := a.Labels[labelDevice], kmsg.StorageKind(a.Labels[labelKind])
		if !kernelDevice.MatchString(dev) {
			return pushtext.Text{}, false
		}
		for _, k := range kmsg.StorageKinds {
			if k == kind {
				return pushtext.Disk(pushtext.DiskFigures{Device: dev, Kind: kind, Phase: phase}), true
			}
		}
	}
	return pushtext.Text{}, false
}
