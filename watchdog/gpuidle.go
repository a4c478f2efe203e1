package watchdog

import "github.com/lavender-ml/lavender/gpu"

// idleLooking is RuleGPUIdle's condition on one GPU (a GPUPhaseRule): at
// most GPUIdleUtil of SM utilization. A phase whose GPUs all look so,
// and that reports no progress for the idle time, holds GPUs it does not
// use: a data loader or a peer it waits on has hung, or the job is stuck
// outside its training loop. A save or an evaluation the client reports
// is progress and never counts.
func idleLooking(d gpu.Device) bool {
	return !d.Lost && d.Has(gpu.FieldUtilization) && d.SMUtil <= GPUIdleUtil
}
