package webhook

import (
	"slices"
	"testing"

	"github.com/lavender-ml/lavender/internal/barktest"
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
	bodies := sortedBodies(srv)
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

// TestWebhookDiskAlerts: DiskSaveWillNotFit, DiskSpaceLow, DiskInodesLow
// and DiskUnreadable reach the phone in serve's words; a path label that
// is not absolute, or a figure missing, falls back to the summary.
func TestWebhookDiskAlerts(t *testing.T) {
	srv := barktest.New(t, "KEY")
	clock := newTestClock() // two minutes after the alerts' start
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, func(c *fixtureConfig) { c.Now = clock.Now })
	if code, answer := f.post(readTestdata(t, "firing_disk.json")); code != 200 || answer != "alerts=6 pushed=6 failed=0 skipped=0 duplicate=0\n" {
		t.Errorf("webhook answered %d %q", code, answer)
	}
	bodies := sortedBodies(srv)
	want := []string{
		"[lavender-2] DiskSaveWillNotFit: /data on gpu-box:9877: DiskSaveWillNotFit",
		"[lavender-2] DiskSpaceLow: data on gpu-box:9877: DiskSpaceLow",
		"[lavender-2] disk /data: 1% of inodes free (1.3k of 65k) — new files will fail",
		"[lavender-2] disk /data: 12 GB free (4% of 250 GB), under the 5% floor",
		"[lavender-2] disk /data: 16 MB free, a checkpoint save takes 24 MB — the next save will fail",
		"[lavender-2] disk /mnt/nfs: unreadable for 2m (statfs failed or did not answer) — a save there may fail",
	}
	if !slices.Equal(bodies, want) {
		t.Errorf("pushed\n%q\nwant\n%q", bodies, want)
	}
	lines := f.barkLines()
	slices.Sort(lines)
	if !slices.Contains(lines, "BARK disk save /data sent ok=1 fail=0") || !slices.Contains(lines, "BARK disk unreadable /mnt/nfs sent ok=1 fail=0") {
		t.Errorf("run log %q", lines)
	}
}
