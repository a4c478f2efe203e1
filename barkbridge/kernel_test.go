package barkbridge

import (
	"slices"
	"testing"

	"lavender/internal/barktest"
)

// TestWebhookKernelFaults: GPUFallenOffBus, GPUXidError and StorageErrors
// reach the phone in the watchdog's words; labels the exporter would not
// write fall back to the summary.
func TestWebhookKernelFaults(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, nil)
	if code, answer := f.post(readTestdata(t, "firing_kernel_faults.json")); code != 200 || answer != "alerts=4 pushed=4 failed=0 skipped=0 duplicate=0\n" {
		t.Errorf("webhook answered %d %q", code, answer)
	}
	var bodies []string
	for _, p := range srv.Pushes() {
		bodies = append(bodies, p.Body)
	}
	slices.Sort(bodies)
	want := []string{
		`[lavender-2] GPU 0000:3b:00: fallen off the bus — reboot the host; phase "Pretrain 1/3" was running`,
		`[lavender-2] GPU 0000:86:00 Xid 48: double-bit ECC error — reset the GPU (nvidia-smi -r)`,
		`[lavender-2] GPUXidError: GPU not a gpu reported Xid 48`,
		`[lavender-2] disk nvme1n1p1 remounted read-only — checkpoints will fail`,
	}
	if !slices.Equal(bodies, want) {
		t.Errorf("pushed\n%q\nwant\n%q", bodies, want)
	}
}
