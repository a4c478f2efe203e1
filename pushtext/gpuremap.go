package pushtext

import (
	"fmt"
	"strconv"

	"github.com/lavender-ml/lavender/watchdog"
)

// GPURemapFigures describe a GPU's row remapping that needs a person.
type GPURemapFigures struct {
	GPUDeviceFigures
	// Failed: the remap failed (the GPU should be replaced); else one is
	// pending until the next GPU reset.
	Failed bool
	// Uncorrectable is how many rows the GPU has remapped for
	// uncorrectable errors, over its life.
	Uncorrectable int
}

// GPURemap is `GPU 2 (0000:38:00): a memory row remap waits for a GPU
// reset (1 row remapped for uncorrectable errors) — reset the GPU
// (nvidia-smi -r) when the run allows; phase "Pretrain 1/3" was using
// it`, or for a failed remap `GPU 2 (0000:38:00): a memory row remap
// failed — replace the GPU`. Its resolution reads `GPU 2 (0000:38:00):
// row remap pending` (or failed). Subject "gpu-remap 2 pending".
func GPURemap(f GPURemapFigures) Text {
	state := "pending"
	if f.Failed {
		state = "failed"
	}
	subject := string(watchdog.RuleGPURemap) + " " + strconv.Itoa(f.Index) + " " + state
	head := oneGPU(f.Index, f.BusID) + ": "
	if f.Over {
		return Text{Body: head + "row remap " + state, Subject: subject}
	}
	rows := ""
	switch {
	case f.Uncorrectable == 1:
		rows = " (1 row remapped for uncorrectable errors)"
	case f.Uncorrectable > 1:
		rows = fmt.Sprintf(" (%d rows remapped for uncorrectable errors)", f.Uncorrectable)
	}
	body := head + "a memory row remap waits for a GPU reset" + rows + " — reset the GPU (nvidia-smi -r) when the run allows"
	if f.Failed {
		body = head + "a memory row remap failed" + rows + " — replace the GPU"
	}
	return Text{Body: body + usedBy(f.Phase, 1), Subject: subject}
}

func watchdogGPURemap(a watchdog.Alert) Text {
	d := firstDevice(a)
	return GPURemap(GPURemapFigures{GPUDeviceFigures: gpuDeviceFigures(a), Failed: d.RemappedRows.Failed, Uncorrectable: d.RemappedRows.Uncorrectable})
}
