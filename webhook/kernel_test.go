package webhook

import (
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/alertmanager/template"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/pushtext"
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
		"[lavender-2] disk /mnt/nfs: unreadable for over 3m (statfs failed or did not answer) — a save there may fail",
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

// TestXidAlertGivesNoActionItCannotKnow: lavender_gpu_xid_errors_total
// counts Xids by GPU and number, without the driver's words, and those
// words decide the action of Xid 154 and of the NVLink5 Xids 144–150. The
// bridge says to read the action in the kernel log for those, where the
// catalog's default would contradict the record (a reboot lost, a GPU reset
// mid-run for a non-fatal error), and gives every other Xid the watchdog's
// words.
func TestXidAlertGivesNoActionItCannotKnow(t *testing.T) {
	xidAlert := func(xid int) template.Alert {
		return template.Alert{Status: "firing", Labels: template.KV{"alertname": GPUXidAlertname, labelGPU: "0000:3b:00", labelXid: strconv.Itoa(xid)}}
	}
	for _, tc := range []struct {
		xid  int
		want string
	}{
		{154, "GPU 0000:3b:00 Xid 154: recovery action changed — see the kernel log for the action"},
		{144, "GPU 0000:3b:00 Xid 144: NVLink SAW error — see the kernel log for the action"},
		{149, "GPU 0000:3b:00 Xid 149: NVLink NETIR error — see the kernel log for the action"},
		{48, "GPU 0000:3b:00 Xid 48: double-bit ECC error — reset the GPU (nvidia-smi -r)"},
		{13, "GPU 0000:3b:00 Xid 13: graphics engine exception — restart the training"},
	} {
		got, ok := kernelFaultText(GPUXidAlertname, xidAlert(tc.xid))
		if !ok || got.Body != tc.want {
			t.Errorf("Xid %d: %q (worded %v), want %q", tc.xid, got.Body, ok, tc.want)
		}
	}
	// Where the catalog alone decides, the record changes nothing: the
	// bridge's words are the watchdog's.
	for _, xid := range kmsg.CatalogXids() {
		if kmsg.ActionInRecord(xid) {
			continue
		}
		got, _ := kernelFaultText(GPUXidAlertname, xidAlert(xid))
		if want := pushtext.GPU(pushtext.GPUFigures{GPU: "0000:3b:00", Xid: xid, Message: "a record's words"}); got.Body != want.Body {
			t.Errorf("Xid %d: bridge %q, watchdog %q", xid, got.Body, want.Body)
		}
	}
}
