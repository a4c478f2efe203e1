package gpu_test

import (
	"testing"
	"time"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/kmsg"
)

// The kernel log's Xid record and NVML's event of the same Xid fold into
// one: kmsg names the GPU as NormalizeBusID does, so a caller feeds both
// to one XidDedup as they come. (The layout test does not count tests, so
// this one may use kmsg; the package itself does not.)
func TestKernelLogAndNVMLXidFoldIntoOne(t *testing.T) {
	rec, ok := kmsg.ParseRecord([]byte("3,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n"))
	if !ok {
		t.Fatal("record did not parse")
	}
	var p kmsg.Parser
	f, ok := p.Parse(rec)
	if !ok || f.Kind != kmsg.Xid {
		t.Fatalf("no Xid in %+v", rec)
	}
	nvmlBus, _ := gpu.NormalizeBusID("00000000:3B:00.0") // NVML's busId of the same GPU
	if f.GPU != nvmlBus {
		t.Fatalf("kmsg names the GPU %q, gpu %q", f.GPU, nvmlBus)
	}
	ev := gpu.XidEvent{Time: time.Now(), Kind: gpu.EventXid, BusID: nvmlBus, Xid: 79}

	var d gpu.XidDedup
	if !d.First(ev.BusID, ev.Xid, ev.Time) {
		t.Error("NVML's event was not first")
	}
	if d.First(f.GPU, uint64(f.Xid), ev.Time.Add(3*time.Second)) {
		t.Error("the kernel log's record of the same Xid was let through too")
	}
}
