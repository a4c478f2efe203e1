package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// kernelRig is serve with the watchdog on and its poll an hour away, so a
// push can come only from the kernel log's event path, reading a FIFO of
// kernel log records.
type kernelRig struct {
	*serveRig
	write func(string)
}

func startKernelServe(t *testing.T, procfs *testkit.Procfs, args ...string) *kernelRig {
	t.Helper()
	path, write := kmsgFIFO(t)
	if procfs == nil {
		procfs = testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.10)})
	}
	r := startServe(t, procfs, append([]string{"--watchdog.interval=1h", "--watchdog.repeat=1h", "--path.kmsg=" + path}, args...)...)
	return &kernelRig{serveRig: r, write: write}
}

// pushOf writes records and waits for the next push, returning its text
// and how long it took.
func (r *kernelRig) pushOf(records string) (string, time.Duration) {
	r.t.Helper()
	before := r.bark.Count()
	start := time.Now()
	r.write(records)
	got := r.bark.WaitPushes(r.t, before+1)
	return got[before].Body, time.Since(start)
}

// TestServePushesEveryKernelFaultForm: every form of the driver's and the
// storage layer's records pushes at once through serve, with its words,
// and is counted; a record a process wrote is neither.
func TestServePushesEveryKernelFaultForm(t *testing.T) {
	t.Parallel()
	// Storm control off: sixteen faults in a second is this test, not a
	// storm the phone should be spared.
	r := startKernelServe(t, nil, "--bark.max-per-minute=0")
	for _, tc := range []struct{ records, push string }{
		{"4,1,1,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n",
			"[lavender-2] GPU 0000:3b:00 Xid 79: fallen off the bus — reboot the host; python3 (pid 4242) was using it"},
		{"4,2,2,-;NVRM: Xid (PCI:0000:86:00 GPU-I:02): 94, pid=4243, name=python3, Contained ECC error.\n",
			"[lavender-2] GPU 0000:86:00 (GPU-I:02) Xid 94: contained memory error — restart the training; python3 (pid 4243) was using it"},
		{"4,3,3,-;NVRM: Xid (PCI:0000:86:00 GPU-I:01 GPU-CI:00): 95, pid=4244, name=torchrun, Uncontained ECC error.\n",
			"[lavender-2] GPU 0000:86:00 (GPU-I:01 GPU-CI:00) Xid 95: uncontained memory error — reset the GPU (nvidia-smi -r); torchrun (pid 4244) was using it"},
		{"4,4,4,-;NVRM: Xid (0000:03:00): 48, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.\n",
			"[lavender-2] GPU 0000:03:00 Xid 48: double-bit ECC error — reset the GPU (nvidia-smi -r)"},
		{"4,5,5,-;NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 0, SM 0): Out Of Range Address\n",
			"[lavender-2] GPU 0000:cb:00 Xid 13: graphics engine exception — restart the training"},
		{"3,6,6,-;NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.\n",
			"[lavender-2] GPU 0000:18:00: fallen off the bus — reboot the host"},
		{"3,7,7,-;NVRM: The NVIDIA GPU 0000:b3:00.0\n3,8,8,-;NVRM: (PCI ID: 10de:1db6) installed in this system has\n3,9,9,-;NVRM: fallen off the bus and is not responding to commands.\n",
			"[lavender-2] GPU 0000:b3:00: fallen off the bus — reboot the host"},
		{"3,10,10,-;NVRM: The NVIDIA GPU 0000:5e:00.0\\x0aNVRM: (PCI ID: 10de:2330) installed in this system has\\x0aNVRM: fallen off the bus and is not responding to commands.\n",
			"[lavender-2] GPU 0000:5e:00: fallen off the bus — reboot the host"},
		{"4,11,11,-;NVRM: Xid (PCI:0000:3b:00): 201, pid=4242, name=python3, Something new.\n",
			"[lavender-2] GPU 0000:3b:00 Xid 201 (not in lavender's Xid catalog): Something new.; python3 (pid 4242) was using it"},
		// A forged record first: the push that follows is the real one.
		{"12,12,12,-;EXT4-fs (sda1): Remounting filesystem read-only\n2,13,13,-;EXT4-fs (nvme1n1p1): Remounting filesystem read-only\n",
			"[lavender-2] disk nvme1n1p1 remounted read-only — checkpoints will fail"},
		{"3,14,14,-;XFS (dm-0): Filesystem has been shut down due to log error (0x2).\n",
			"[lavender-2] disk dm-0 filesystem shut down — checkpoints will fail"},
		{"3,15,15,-;Buffer I/O error on dev sdb1, logical block 0, async page read\n",
			"[lavender-2] disk sdb1 I/O error — checkpoints may fail"},
		{"3,16,16,-;blk_update_request: I/O error, dev sdc, sector 12345 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0\n",
			"[lavender-2] disk sdc I/O error — checkpoints may fail"},
		{"4,17,17,-;nvme nvme0: I/O 123 QID 4 timeout, aborting\n",
			"[lavender-2] disk nvme0 NVMe command timed out — the disk may be failing"},
		{"3,18,18,-;nvme nvme1: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0x10\n",
			"[lavender-2] disk nvme1 NVMe controller is down — checkpoints will fail"},
		{"4,19,19,-;nvme nvme1: resetting controller\n",
			"[lavender-2] disk nvme1 NVMe controller reset — the disk may be failing"},
	} {
		got, took := r.pushOf(tc.records)
		if got != tc.push {
			t.Errorf("push %q\nwant %q", got, tc.push)
		}
		t.Logf("%s: pushed %s after the write", strings.SplitN(tc.push, " — ", 2)[0], took.Round(time.Millisecond))
	}
	page := waitMetric(t, r.base, `lavender_storage_errors_total{device="nvme1",kind="nvme_reset"} 1`)
	for _, line := range []string{
		`lavender_gpu_xid_errors_total{gpu="0000:86:00",xid="95"} 1`,
		`lavender_gpu_fallen_off_bus_total{gpu="0000:b3:00"} 1`,
		`lavender_gpu_fallen_off_bus_total{gpu="0000:5e:00"} 1`,
		`lavender_kernel_log_ignored_records_total 1`,
	} {
		if !strings.Contains(page, line+"\n") {
			t.Errorf("no %s", line)
		}
	}
	if strings.Contains(page, `device="sda1"`) {
		t.Error("the forged record was counted")
	}
	if n := r.bark.Count(); n != 16 {
		t.Errorf("%d pushes, want one per fault", n)
	}
}

// TestServeKernelFlood: 100,000 records of a failing host (an Xid storm on
// one GPU, I/O errors on one disk, driver chatter) are every one counted,
// and push a handful of times: the first record of each fault.
func TestServeKernelFlood(t *testing.T) {
	t.Parallel()
	r := startKernelServe(t, nil)
	const n = 20_000
	var b strings.Builder
	for i := range n {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "4,%d,%d,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n", i, i)
		case 1:
			fmt.Fprintf(&b, "3,%d,%d,-;I/O error, dev nvme1n1, sector %d op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0\n", i, i, i)
		case 2:
			fmt.Fprintf(&b, "6,%d,%d,-;nvme nvme0: 8/0/0 default/read/poll queues\n", i, i)
		default:
			fmt.Fprintf(&b, "12,%d,%d,-;NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=forged, Double bit ECC error.\n", i, i)
		}
	}
	r.write(b.String())
	waitMetric(t, r.base, fmt.Sprintf("lavender_kernel_log_records_total %d", n))
	page := waitMetric(t, r.base, fmt.Sprintf(`lavender_gpu_xid_errors_total{gpu="0000:3b:00",xid="79"} %d`, n/4))
	for _, line := range []string{
		fmt.Sprintf(`lavender_storage_errors_total{device="nvme1n1",kind="io_error"} %d`, n/4),
		fmt.Sprintf(`lavender_kernel_log_ignored_records_total %d`, n/4),
	} {
		if !strings.Contains(page, line+"\n") {
			t.Errorf("no %s in\n%s", line, grepLines(page, "lavender_"))
		}
	}
	if strings.Contains(page, `xid="48"`) {
		t.Error("forged records were counted")
	}
	pushes := r.pushes()
	if len(pushes) < 1 || len(pushes) > 3 {
		t.Errorf("%d pushes for the flood, want a handful: %q", len(pushes), pushes)
	}
}

// TestServeFaultNamesThePhaseOfAGrandchild: with the real procfs, an Xid
// naming a grandchild of a phase's process names the phase; the phase then
// fails with only an exit status for a reason, and gets the Xid as its
// reason instead.
func TestServeFaultNamesThePhaseOfAGrandchild(t *testing.T) {
	t.Parallel()
	bootID, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	pidNS, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skipf("no pid namespace: %v", err)
	}
	// sh (the phase's process) → a subshell → sleep, whose pid the
	// subshell prints.
	cmd := exec.Command("sh", "-c", "(sleep 60 & echo $!; wait) & wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("pkill", "-P", strconv.Itoa(cmd.Process.Pid)).Run()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}

	// The real procfs: the exporter must see the real processes.
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.10)})
	r := startKernelServe(t, procfs, "--path.procfs=/proc", "--watchdog.threshold=1", "--watchdog.pressure-threshold=0", "--no-watchdog.oom")
	start := fmt.Sprintf(`{"phase":"Pretrain 1/3","event":"start","pid":%d,"boot_id":%q,"pid_ns":%q}`, cmd.Process.Pid, strings.TrimSpace(string(bootID)), pidNS)
	if code, body := testkit.MustDo(t, nil, "POST", r.base+"/api/v1/heartbeat", []byte(start), "", ""); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	got, _ := r.pushOf(fmt.Sprintf("4,1,1,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=%d, name=python3, GPU has fallen off the bus.\n", grandchild))
	want := fmt.Sprintf(`[lavender-2] GPU 0000:3b:00 Xid 79: fallen off the bus — reboot the host; phase "Pretrain 1/3" (python3, pid %d) was using it`, grandchild)
	if got != want {
		t.Errorf("push %q\nwant %q", got, want)
	}
	end := `{"phase":"Pretrain 1/3","event":"end","status":"failed","reason":"exit status 1"}`
	if code, body := testkit.MustDo(t, nil, "POST", r.base+"/api/v1/heartbeat", []byte(end), "", ""); code != 200 {
		t.Fatalf("end: %d %s", code, body)
	}
	_, phases := testkit.MustDo(t, nil, "GET", r.base+"/api/v1/phases", nil, "", "")
	var table struct {
		Phases []struct{ Name, Status, Reason string }
	}
	if err := json.Unmarshal([]byte(phases), &table); err != nil || len(table.Phases) != 1 {
		t.Fatalf("phases: %s (%v)", phases, err)
	}
	if p := table.Phases[0]; p.Status != "failed" || p.Reason != "GPU 0000:3b:00 Xid 79: fallen off the bus" {
		t.Errorf("the failed phase: %+v; want the Xid as its reason", p)
	}
}
