package pushtext

import (
	"fmt"
	"strconv"

	"github.com/lavender-ml/lavender/watchdog"
)

// GPUECCFigures describe new uncorrectable ECC errors on one GPU.
type GPUECCFigures struct {
	GPUDeviceFigures
	New   uint64 // new in this incident
	Since uint64 // the volatile count: since the driver loaded
}

// GPUECC is `GPU 4 (0000:58:00): 2 new uncorrectable ECC errors (4 since
// the driver loaded) — its processes may have read bad memory; reset the
// GPU (nvidia-smi -r) when it is free; phase "Pretrain 1/3" was using
// it`. Its resolution reads `GPU 4 (0000:58:00): 3 new uncorrectable ECC
// errors, none since`. Subject "gpu-ecc 4 +2".
func GPUECC(f GPUECCFigures) Text {
	subject := string(watchdog.RuleGPUECC) + " " + strconv.Itoa(f.Index) + " +" + strconv.FormatUint(f.New, 10)
	errs := "errors"
	if f.New == 1 {
		errs = "error"
	}
	head := fmt.Sprintf("%s: %d new uncorrectable ECC %s", oneGPU(f.Index, f.BusID), f.New, errs)
	if f.Over {
		return Text{Body: head + ", none since", Subject: subject}
	}
	body := fmt.Sprintf("%s (%d since the driver loaded) — its processes may have read bad memory; reset the GPU (nvidia-smi -r) when it is free", head, f.Since)
	return Text{Body: body + usedBy(f.Phase, 1), Subject: subject}
}

func watchdogGPUECC(a watchdog.Alert) Text {
	return GPUECC(GPUECCFigures{GPUDeviceFigures: gpuDeviceFigures(a), New: a.GPU.NewECC, Since: firstDevice(a).ECCVolatileUncorrected})
}
