package exporter

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Device names the accelerator a run uses, as the predecessor's header did:
// "cuda" when an NVIDIA device node or nvidia-smi is present, "mps" on
// Apple silicon, otherwise "cpu".
func Device() string {
	return detectDevice("/dev", runtime.GOOS, runtime.GOARCH, exec.LookPath)
}

func detectDevice(devDir, goos, goarch string, lookPath func(string) (string, error)) string {
	for _, node := range []string{"nvidiactl", "nvidia0"} {
		if _, err := os.Stat(filepath.Join(devDir, node)); err == nil {
			return "cuda"
		}
	}
	if _, err := lookPath("nvidia-smi"); err == nil {
		return "cuda"
	}
	if goos == "darwin" && goarch == "arm64" {
		return "mps"
	}
	return "cpu"
}
