package watchdog

// RuleName names a rule in its alerts, the metrics, the run log,
// --bark.level and --phase.notify. Every rule's name is declared here, so
// that no package spells one as a bare string.
type RuleName string

// The rules, in the order their alerts appear in a push.
const (
	RuleSwap     RuleName = "swap"     // swap used over --watchdog.threshold
	RulePressure RuleName = "pressure" // memory pressure (PSI) over --watchdog.pressure-threshold
	RuleOOM      RuleName = "oom"      // the OOM killer struck
	RuleFailed   RuleName = "failed"   // a phase ended failed, died without ending, or ended unwatched with no end
	RuleStalled  RuleName = "stalled"  // an active phase sent no heartbeat, or its step stopped
	RuleLoss     RuleName = "loss"     // a phase's training loss turned NaN or infinite
	RuleDone     RuleName = "done"     // a phase ended ok
	RuleGPU      RuleName = "gpu"      // Xid errors and GPUs fallen off the bus
	// The GPU telemetry rules, from NVML's pass of each poll.
	RuleGPULost     RuleName = "gpu-lost"     // NVML answers GPU_IS_LOST for a GPU
	RuleGPUECC      RuleName = "gpu-ecc"      // a GPU's volatile uncorrected ECC count rose
	RuleGPURemap    RuleName = "gpu-remap"    // a GPU's row remap is pending (reset) or failed (replace)
	RuleGPUHang     RuleName = "gpu-hang"     // a phase's GPUs busy at little power with no progress: a hung collective
	RuleGPUIdle     RuleName = "gpu-idle"     // a phase's GPUs idle with no progress
	RuleGPUSlowdown RuleName = "gpu-slowdown" // a hardware slowdown (thermal, power brake) lasting minutes
	RuleDisk        RuleName = "disk"         // the kernel log's storage faults: filesystem errors, read-only remounts, I/O errors, NVMe faults
	// RuleDiskSpace is the disk guard's: free space, inodes, the next
	// save, unreadable watched paths.
	RuleDiskSpace RuleName = "disk-space"
)

// FromNVML reports whether the rule is a GPU telemetry rule: it reads
// NVML's pass alone, so a host without NVML never raises it.
func (r RuleName) FromNVML() bool {
	switch r {
	case RuleGPULost, RuleGPUECC, RuleGPURemap, RuleGPUHang, RuleGPUIdle, RuleGPUSlowdown:
		return true
	}
	return false
}
