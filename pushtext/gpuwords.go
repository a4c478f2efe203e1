package pushtext

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/watchdog"
)

// GPURange writes GPU indexes compacted, ascending: "0–7", "0–3,6", "5".
// A run of two is written as two ("2,3"), which reads as plainly.
func GPURange(idx []int) string {
	idx = slices.Clone(idx)
	slices.Sort(idx)
	idx = slices.Compact(idx)
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.Itoa(idx[i]))
		case j == i+1:
			parts = append(parts, strconv.Itoa(idx[i]), strconv.Itoa(idx[j]))
		default:
			parts = append(parts, strconv.Itoa(idx[i])+"–"+strconv.Itoa(idx[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// gpus is "GPU 3" or "GPUs 0–7".
func gpus(idx []int) string {
	if len(idx) == 1 {
		return "GPU " + strconv.Itoa(idx[0])
	}
	return "GPUs " + GPURange(idx)
}

// oneGPU is "GPU 3 (0000:3b:00)": the index nvidia-smi shows and the bus
// id the kernel log names.
func oneGPU(index int, busID string) string {
	s := "GPU " + strconv.Itoa(index)
	if b := oneLine(busID); b != "" {
		s += " (" + b + ")"
	}
	return s
}

// usedBy is "; phase "Pretrain 1/3" was using it" (them, for several
// GPUs), "" without a phase.
func usedBy(phase string, n int) string {
	if phase == "" {
		return ""
	}
	it := "it"
	if n > 1 {
		it = "them"
	}
	return "; phase " + strconv.Quote(phaseName(phase)) + " was using " + it
}

// watts is "72 W".
func watts(w float64) string { return fmt.Sprintf("%.0f W", w) }

// firstDevice is the alert's one GPU (the per-GPU rules).
func firstDevice(a watchdog.Alert) gpu.Device {
	if len(a.GPU.Devices) == 0 {
		return gpu.Device{Index: -1}
	}
	return a.GPU.Devices[0]
}
