package watchdog

import (
	"testing"

	"github.com/lavender-ml/lavender/kmsg"
)

// TestPhasesOfFaults: a record naming a process gets that process's phase
// (asked once per pid), one naming none gets the running phase, a pid no
// phase owns gets none, and OOM kills are left to the OOM rule.
func TestPhasesOfFaults(t *testing.T) {
	asked := map[int]int{}
	phaseOf := func(pid int) (string, bool) {
		asked[pid]++
		if pid == 4242 {
			return "Pretrain 1/3", true
		}
		return "", false
	}
	faults := []kmsg.Fault{
		{Kind: kmsg.Xid, GPU: "0000:3b:00", Xid: 79, PID: 4242},
		{Kind: kmsg.Xid, GPU: "0000:3b:00", Xid: 48, PID: 4242},
		{Kind: kmsg.OOMKill, PID: 4242},
		{Kind: kmsg.Xid, GPU: "0000:18:00", Xid: 13, PID: 77},
		{Kind: kmsg.Storage, Device: "nvme1n1p1", Storage: kmsg.ReadOnly},
	}
	got := PhasesOfFaults(faults, phaseOf, "Eval")
	want := []struct {
		phase string
		byPID bool
	}{{"Pretrain 1/3", true}, {"Pretrain 1/3", true}, {"", false}, {"Eval", false}}
	if len(got) != len(want) {
		t.Fatalf("got %d faults, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Phase != w.phase || got[i].ByPID != w.byPID {
			t.Errorf("fault %d (%+v): phase %q byPID %v, want %q %v", i, got[i].Fault, got[i].Phase, got[i].ByPID, w.phase, w.byPID)
		}
	}
	if asked[4242] != 1 || asked[77] != 1 {
		t.Errorf("pids asked %v, want each once", asked)
	}
	if got := PhasesOfFaults(nil, phaseOf, "Eval"); len(got) != 0 {
		t.Errorf("no faults gave %+v", got)
	}
}

// TestEndsPhase: which faults become a failed phase's reason.
func TestEndsPhase(t *testing.T) {
	xid := func(n int) kmsg.Fault { return kmsg.Fault{Kind: kmsg.Xid, GPU: "0000:3b:00", Xid: n} }
	disk := func(k kmsg.StorageKind) kmsg.Fault {
		return kmsg.Fault{Kind: kmsg.Storage, Device: "nvme1n1p1", Storage: k}
	}
	for _, tc := range []struct {
		name  string
		f     KernelFault
		fatal bool
	}{
		{"no phase", KernelFault{Fault: xid(79)}, false},
		{"fallen off, running phase", KernelFault{Fault: xid(79), Phase: "p"}, true},
		{"fallen off without an Xid", KernelFault{Fault: kmsg.Fault{Kind: kmsg.FallenOffBus, GPU: "0000:3b:00"}, Phase: "p"}, true},
		{"reset GPU, running phase", KernelFault{Fault: xid(48), Phase: "p"}, true},
		{"restart app, running phase", KernelFault{Fault: xid(13), Phase: "p"}, false},
		{"restart app, its process", KernelFault{Fault: xid(13), Phase: "p", ByPID: true}, true},
		{"ignore, its process", KernelFault{Fault: xid(43), Phase: "p", ByPID: true}, false},
		{"unknown Xid, its process", KernelFault{Fault: xid(9999), Phase: "p", ByPID: true}, true},
		{"unknown Xid, running phase", KernelFault{Fault: xid(9999), Phase: "p"}, false},
		{"read-only", KernelFault{Fault: disk(kmsg.ReadOnly), Phase: "p"}, true},
		{"XFS shutdown", KernelFault{Fault: disk(kmsg.Shutdown), Phase: "p"}, true},
		{"NVMe down", KernelFault{Fault: disk(kmsg.NVMeDown), Phase: "p"}, true},
		{"I/O error", KernelFault{Fault: disk(kmsg.IOError), Phase: "p"}, false},
		{"NVMe reset", KernelFault{Fault: disk(kmsg.NVMeReset), Phase: "p", ByPID: true}, false},
	} {
		if got := tc.f.EndsPhase(); got != tc.fatal {
			t.Errorf("%s: EndsPhase() = %v, want %v", tc.name, got, tc.fatal)
		}
	}
}
