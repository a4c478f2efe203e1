package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// kmsgFIFO makes a FIFO to give as --path.kmsg and returns its path and a
// function that writes records into it.
func kmsgFIFO(t *testing.T) (path string, write func(records string)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "kmsg.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	return path, func(records string) {
		t.Helper()
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.WriteString(records); err != nil {
			t.Fatal(err)
		}
	}
}

// waitMetric scrapes base until /metrics has line, and returns the page.
func waitMetric(t *testing.T, base, line string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, page := testkit.MustDo(t, nil, "GET", base+"/metrics", nil, "", "")
		if strings.Contains(page, line+"\n") {
			return page
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in /metrics:\n%s", line, grepLines(page, "lavender_"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExporterCountsKernelFaults: `lavender exporter` reads a FIFO of
// kernel log records and counts Xids, GPUs fallen off the bus and storage
// errors; the forged facility-1 record counts as ignored, not as a fault.
func TestExporterCountsKernelFaults(t *testing.T) {
	t.Parallel()
	path, write := kmsgFIFO(t)
	base, _ := startExporter(t, "--path.kmsg="+path)
	waitMetric(t, base, "lavender_kernel_log_readable 1")
	write("4,1,1,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n" +
		"12,2,2,-;NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=forged, Double bit ECC error.\n" +
		"3,3,3,-;NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.\n" +
		"2,4,4,-;EXT4-fs (nvme1n1p1): Remounting filesystem read-only\n")
	page := waitMetric(t, base, `lavender_storage_errors_total{device="nvme1n1p1",kind="read_only"} 1`)
	for _, line := range []string{
		`lavender_gpu_xid_errors_total{gpu="0000:3b:00",xid="79"} 1`,
		`lavender_gpu_fallen_off_bus_total{gpu="0000:3b:00"} 1`,
		`lavender_gpu_fallen_off_bus_total{gpu="0000:18:00"} 1`,
		`lavender_kernel_log_records_total 4`,
		`lavender_kernel_log_ignored_records_total 1`,
	} {
		if !strings.Contains(page, line+"\n") {
			t.Errorf("no %s in:\n%s", line, grepLines(page, "lavender_"))
		}
	}
	if strings.Contains(page, `xid="48"`) {
		t.Errorf("a userspace record was counted:\n%s", grepLines(page, "xid"))
	}
}

// TestExporterKernelLogUnreadable: a log lavender cannot open shows as 0.
func TestExporterKernelLogUnreadable(t *testing.T) {
	t.Parallel()
	base, _ := startExporter(t, "--path.kmsg="+filepath.Join(t.TempDir(), "missing"))
	page := waitMetric(t, base, "lavender_kernel_log_readable 0")
	if strings.Contains(page, "lavender_kernel_log_records_total") {
		t.Errorf("counts of a log never read:\n%s", grepLines(page, "kernel_log"))
	}
}

// TestStatusPageSaysTheKernelLogIsUnread: the page and its JSON say the
// kernel log is not read, and why.
func TestStatusPageSaysTheKernelLogIsUnread(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	base, _ := startExporter(t, "--path.kmsg="+missing)
	_, page := testkit.MustDo(t, nil, "GET", base+"/", nil, "", "")
	if !strings.Contains(page, `id="kernel-log"`) || !strings.Contains(page, "kernel log not read: ") || !strings.Contains(page, "no such file") {
		t.Errorf("the page does not say the kernel log is unread:\n%s", grepLines(page, "kernel"))
	}
	_, js := testkit.MustDo(t, nil, "GET", base+"/api/v1/status", nil, "", "")
	if !strings.Contains(js, `"kernel_log":{"readable":false,"why":"kernel log: stat `) {
		t.Errorf("status JSON: %s", grepLines(js, "kernel"))
	}
	path, _ := kmsgFIFO(t)
	base, _ = startExporter(t, "--path.kmsg="+path)
	if _, page := testkit.MustDo(t, nil, "GET", base+"/", nil, "", ""); strings.Contains(page, `id="kernel-log"`) {
		t.Errorf("a readable log is reported unread:\n%s", grepLines(page, "kernel"))
	}
}

// TestKmsgPathRefusesWhatIsNoKernelLog: serve and the exporter refuse to
// start on a --path.kmsg that can never be the kernel log (/dev/zero was
// read at full speed for ever, reported readable), naming the path and
// what it is, before they listen.
func TestKmsgPathRefusesWhatIsNoKernelLog(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skipf("no /dev/zero: %v", err)
	}
	g := testGlobals(io.Discard, io.Discard)
	// Bounded: a command that did not refuse would serve until this ends.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const want = "--path.kmsg: kernel log: refusing /dev/zero: it is character device 1:5 (/dev/zero), not the kernel log"
	cli := parseCLI(t, testkit.QuietServeArgs(t, barktest.ConfigDir(t, nil), t.TempDir(), "--path.kmsg=/dev/zero")...)
	if err := cli.Serve.serve(ctx, g, nil, nil); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("serve: %v; want %q", err, want)
	}
	cli = parseCLI(t, "exporter", "--web.listen-address=127.0.0.1:0", "--runlog.dir="+t.TempDir(), "--path.kmsg=/dev/zero")
	if err := cli.Exporter.serve(ctx, g, nil); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("exporter: %v; want %q", err, want)
	}
}
