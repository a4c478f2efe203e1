package pushtext

import (
	"testing"
	"time"

	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/watchdog"
)

// TestKernelTexts pins the words of every GPU and disk push.
func TestKernelTexts(t *testing.T) {
	xid := func(n int, pid int, name, phase string, byPID bool) watchdog.Alert {
		return watchdog.Alert{Rule: watchdog.RuleGPU, Status: watchdog.Firing, Fault: watchdog.KernelFault{
			Fault: kmsg.Fault{Kind: kmsg.Xid, GPU: "0000:3b:00", Xid: n, PID: pid, Name: name, Message: "A future Xid\x1b[31m the catalog does not know, with a long tail of driver words after it"},
			Phase: phase, ByPID: byPID}}
	}
	disk := func(kind kmsg.StorageKind, phase string) watchdog.Alert {
		return watchdog.Alert{Rule: watchdog.RuleDisk, Status: watchdog.Firing, Fault: watchdog.KernelFault{
			Fault: kmsg.Fault{Kind: kmsg.Storage, Device: "nvme1n1p1", Storage: kind}, Phase: phase}}
	}
	mig := xid(94, 4242, "python3", "Pretrain 1/3", true)
	mig.Fault.GPU, mig.Fault.Instance = "0000:86:00", "GPU-I:02"
	repeated := xid(13, 4242, "python3", "Pretrain 1/3", true)
	repeated.Status, repeated.Repeats, repeated.Window = watchdog.Reminder, 41, 10*time.Minute
	lost := watchdog.Alert{Rule: watchdog.RuleGPU, Fault: watchdog.KernelFault{Fault: kmsg.Fault{Kind: kmsg.FallenOffBus, GPU: "0000:18:00"}}}
	xid154 := xid(154, 0, "", "", false)
	xid154.Fault.Message = "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
	storm := disk(kmsg.IOError, "Pretrain 1/3")
	storm.Fault.Device, storm.Repeats, storm.Window = "sda", 1, 3*time.Minute
	nvlink := func(n int, message string) watchdog.Alert {
		a := xid(n, 0, "", "", false)
		a.Fault.GPU, a.Fault.Message = "0000:00:00", message
		return a
	}
	gone := disk(kmsg.NVMeDown, "")
	gone.Fault.Device = "nvme2n1"
	for _, tc := range []struct {
		a             watchdog.Alert
		body, subject string
	}{
		{nvlink(149, "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"),
			`GPU 0000:00:00 Xid 149: NVLink NETIR error — reset the GPU (nvidia-smi -r)`, "gpu 0000:00:00 xid 149"},
		{nvlink(144, "SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)"),
			`GPU 0000:00:00 Xid 144: NVLink SAW error — no action needed`, "gpu 0000:00:00 xid 144"},
		{xid(14, 0, "", "", false), `GPU 0000:3b:00 Xid 14: fake or injected error from userspace — no action needed`, "gpu 0000:3b:00 xid 14"},
		{xid(44, 0, "", "", false), `GPU 0000:3b:00 Xid 44: graphics engine fault during context switch — no action needed`, "gpu 0000:3b:00 xid 44"},
		{gone, `disk nvme2n1 gone (capacity dropped to 0) — checkpoints will fail`, "disk nvme2n1 nvme_down"},
		{xid(79, 4242, "python3", "Pretrain 1/3", true),
			`GPU 0000:3b:00 Xid 79: fallen off the bus — reboot the host; phase "Pretrain 1/3" (python3, pid 4242) was using it`, "gpu 0000:3b:00 xid 79"},
		{mig, `GPU 0000:86:00 (GPU-I:02) Xid 94: contained memory error — restart the training; phase "Pretrain 1/3" (python3, pid 4242) was using it`, "gpu 0000:86:00 xid 94"},
		{xid(48, 0, "", "Finetune", false), `GPU 0000:3b:00 Xid 48: double-bit ECC error — reset the GPU (nvidia-smi -r); phase "Finetune" was running`, "gpu 0000:3b:00 xid 48"},
		{xid(31, 777, "pt_main_thread", "", false), `GPU 0000:3b:00 Xid 31: GPU memory page fault — restart the training; pt_main_thread (pid 777) was using it`, "gpu 0000:3b:00 xid 31"},
		{xid(201, 0, "", "", false), `GPU 0000:3b:00 Xid 201 (not in lavender's Xid catalog): A future Xid [31m the catalog does not know, with a long tail of driver words…`, "gpu 0000:3b:00 xid 201"},
		{xid154, `GPU 0000:3b:00 Xid 154: recovery action changed — reset the GPU (nvidia-smi -r)`, "gpu 0000:3b:00 xid 154"},
		{repeated, `GPU 0000:3b:00 Xid 13 again 41 times in 10m: graphics engine exception — restart the training; phase "Pretrain 1/3" (python3, pid 4242) was using it`, "gpu 0000:3b:00 xid 13 ×41"},
		{lost, `GPU 0000:18:00: fallen off the bus — reboot the host`, "gpu 0000:18:00"},
		{disk(kmsg.ReadOnly, ""), `disk nvme1n1p1 remounted read-only — checkpoints will fail`, "disk nvme1n1p1 read_only"},
		{disk(kmsg.Shutdown, "Pretrain 1/3"), `disk nvme1n1p1 filesystem shut down — checkpoints will fail; phase "Pretrain 1/3" was running`, "disk nvme1n1p1 shutdown"},
		{disk(kmsg.NVMeDown, ""), `disk nvme1n1p1 NVMe controller is down — checkpoints will fail`, "disk nvme1n1p1 nvme_down"},
		{storm, `disk sda I/O error again in 3m — checkpoints may fail; phase "Pretrain 1/3" was running`, "disk sda io_error ×1"},
	} {
		got := Alert(tc.a)
		if got.Body != tc.body || got.Subject != tc.subject {
			t.Errorf("got  %q / %q\nwant %q / %q", got.Body, got.Subject, tc.body, tc.subject)
		}
	}
}

// TestGPUWithoutTheRecord: an Xid worded without its kernel log record
// (NoRecord, from the counter an alert is on) gives the catalog's action
// where the catalog alone decides it, and for the Xids whose record states
// it (154, the NVLink5 144–150) says to read it there, never the catalog's
// default that the record may contradict.
func TestGPUWithoutTheRecord(t *testing.T) {
	for _, tc := range []struct {
		g    GPUFigures
		want string
	}{
		{GPUFigures{GPU: "0000:3b:00", Xid: 154, NoRecord: true}, "GPU 0000:3b:00 Xid 154: recovery action changed — see the kernel log for the action"},
		{GPUFigures{GPU: "0000:3b:00", Xid: 144, NoRecord: true}, "GPU 0000:3b:00 Xid 144: NVLink SAW error — see the kernel log for the action"},
		{GPUFigures{GPU: "0000:3b:00", Xid: 149, NoRecord: true, Phase: "Pretrain 1/3"},
			`GPU 0000:3b:00 Xid 149: NVLink NETIR error — see the kernel log for the action; phase "Pretrain 1/3" was running`},
		{GPUFigures{GPU: "0000:3b:00", Xid: 150, NoRecord: true}, "GPU 0000:3b:00 Xid 150: " + mustXid(t, 150).Description + " — see the kernel log for the action"},
		{GPUFigures{GPU: "0000:3b:00", Xid: 143, NoRecord: true}, "GPU 0000:3b:00 Xid 143: " + mustXid(t, 143).Description + " — reset the GPU (nvidia-smi -r)"},
		{GPUFigures{GPU: "0000:3b:00", Xid: 155, NoRecord: true}, "GPU 0000:3b:00 Xid 155: NVLink link down — reset the GPU (nvidia-smi -r)"},
		{GPUFigures{GPU: "0000:86:00", Xid: 48, NoRecord: true}, "GPU 0000:86:00 Xid 48: double-bit ECC error — reset the GPU (nvidia-smi -r)"},
		{GPUFigures{GPU: "0000:3b:00", NoRecord: true}, "GPU 0000:3b:00: fallen off the bus — reboot the host"},
		// The watchdog has the record: its words decide.
		{GPUFigures{GPU: "0000:3b:00", Xid: 154, Message: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"},
			"GPU 0000:3b:00 Xid 154: recovery action changed — reboot the host"},
		{GPUFigures{GPU: "0000:3b:00", Xid: 144, Message: "SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)"},
			"GPU 0000:3b:00 Xid 144: NVLink SAW error — no action needed"},
	} {
		if got := GPU(tc.g).Body; got != tc.want {
			t.Errorf("GPU(%+v)\n got %q\nwant %q", tc.g, got, tc.want)
		}
	}
}

func mustXid(t *testing.T, xid int) kmsg.XidInfo {
	t.Helper()
	info, ok := kmsg.LookupXid(xid)
	if !ok {
		t.Fatalf("Xid %d not in the catalog", xid)
	}
	return info
}
