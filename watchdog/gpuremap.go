package watchdog

import "github.com/lavender-ml/lavender/gpu"

// remapNeeded is RuleGPURemap's condition (a GPUDeviceRule): a row remap
// of the GPU's memory waits for a reset (Pending: the bad row is still in
// use until then) or failed (Failed: the GPU has no spare rows left and
// should be replaced). known is false where the GPU does not report row
// remapping (before Ampere) or was not read.
func remapNeeded(d gpu.Device) (on, known bool) {
	if d.Lost || !d.Has(gpu.FieldRemappedRows) {
		return false, false
	}
	return d.RemappedRows.Pending || d.RemappedRows.Failed, true
}
