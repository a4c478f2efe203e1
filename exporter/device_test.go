package exporter

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestDetectDevice(t *testing.T) {
	noSMI := func(string) (string, error) { return "", errors.New("not found") }
	withSMI := func(string) (string, error) { return "/usr/bin/nvidia-smi", nil }
	gpuDev := t.TempDir()
	if err := os.WriteFile(filepath.Join(gpuDev, "nvidiactl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	emptyDev := t.TempDir()
	for _, tc := range []struct {
		name, dev, goos, goarch string
		lookPath                func(string) (string, error)
		want                    string
	}{
		{"device node", gpuDev, "linux", "amd64", noSMI, "cuda"},
		{"nvidia-smi only", emptyDev, "linux", "amd64", withSMI, "cuda"},
		{"apple silicon", emptyDev, "darwin", "arm64", noSMI, "mps"},
		{"intel mac", emptyDev, "darwin", "amd64", noSMI, "cpu"},
		{"plain linux", emptyDev, "linux", "amd64", noSMI, "cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := detectDevice(tc.dev, tc.goos, tc.goarch, tc.lookPath); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
