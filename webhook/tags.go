package webhook

import (
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/watchdog"
)

// alertRules are the watchdog rules whose pushes the alerts of alerts.yml
// carry, so that a push through Prometheus is tagged as serve's is.
var alertRules = map[string]watchdog.RuleName{
	DefaultSwapAlertname:          watchdog.RuleSwap,
	PressureAlertname:             watchdog.RulePressure,
	OOMAlertname:                  watchdog.RuleOOM,
	PhaseFailedAlertname:          watchdog.RuleFailed,
	PhaseStalledAlertname:         watchdog.RuleStalled,
	PhaseProgressStalledAlertname: watchdog.RuleStalled,
	PhaseLossAlertname:            watchdog.RuleLoss,
	GPUXidAlertname:               watchdog.RuleGPU,
	GPUFallenOffAlertname:         watchdog.RuleGPU,
	StorageErrorsAlertname:        watchdog.RuleDisk,
	GPUHungAlertname:              watchdog.RuleGPUHang,
	GPULostAlertname:              watchdog.RuleGPULost,
	GPURemapPendingAlertname:      watchdog.RuleGPURemap,
	GPURemapFailedAlertname:       watchdog.RuleGPURemap,
	GPUECCAlertname:               watchdog.RuleGPUECC,
	GPUHardwareSlowAlertname:      watchdog.RuleGPUSlowdown,
	DiskSaveAlertname:             watchdog.RuleDiskSpace,
	DiskSpaceAlertname:            watchdog.RuleDiskSpace,
	DiskInodesAlertname:           watchdog.RuleDiskSpace,
	DiskUnreadableAlertname:       watchdog.RuleDiskSpace,
}

// tags are the tags of an alert's push: the emoji of the rule it mirrors
// (a warning for any other alert, a check mark when resolved), then the
// alert's name.
func tags(alertname string, resolved bool) []string {
	emoji := pushtext.Tags(alertRules[alertname], resolved)[0]
	if alertname == "" {
		return []string{emoji}
	}
	return []string{emoji, alertname}
}
