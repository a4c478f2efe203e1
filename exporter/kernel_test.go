package exporter

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/kmsg"
)

// corpusFaults parses the kernel log corpus the kmsg package keeps.
func corpusFaults(t *testing.T) []kmsg.Fault {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "kmsg", "testdata", "corpus.kmsg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p kmsg.Parser
	var out []kmsg.Fault
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rec, ok := kmsg.ParseRecord(sc.Bytes()); ok {
			if fault, ok := p.Parse(rec); ok {
				out = append(out, fault)
			}
		}
	}
	return out
}

// TestKernelLogGolden counts the faults of the kmsg corpus (every Xid form,
// fallen off the bus with and without an Xid, every storage kind; the
// forged facility-1 records are not among them) against a golden file, and
// lints the result.
func TestKernelLogGolden(t *testing.T) {
	fresh := func() prometheus.Collector {
		k := NewKernelLog()
		k.SetReadable(true, func() kmsg.Stats { return kmsg.Stats{Records: 53, Ignored: 3, Lost: 1} })
		k.observe(corpusFaults(t))
		return k
	}
	goldenCompare(t, fresh(), fresh, "kernel_log")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(fresh())
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// TestKernelLogUnreadable: a log lavender cannot read shows as 0 and
// nothing else, so an alert can tell blindness from health.
func TestKernelLogUnreadable(t *testing.T) {
	k := NewKernelLog()
	want := `# HELP lavender_kernel_log_readable ` + helpOf(t, k, "lavender_kernel_log_readable") + `
# TYPE lavender_kernel_log_readable gauge
lavender_kernel_log_readable 0
`
	if err := testutil.CollectAndCompare(k, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func helpOf(t *testing.T, c prometheus.Collector, name string) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetHelp()
		}
	}
	t.Fatalf("no %s", name)
	return ""
}

// TestKernelLogLabelsBounded: a log naming 100 GPUs, 200 Xid numbers and
// 100 devices keeps the series bounded; the first values keep their own
// series and every record is still counted.
func TestKernelLogLabelsBounded(t *testing.T) {
	k := NewKernelLog()
	var faults []kmsg.Fault
	for i := range 100 {
		faults = append(faults,
			kmsg.Fault{Kind: kmsg.Xid, GPU: fmt.Sprintf("0000:%02x:00", i), Xid: 1 + i%200},
			kmsg.Fault{Kind: kmsg.Xid, GPU: "0000:3b:00", Xid: 1 + (i+100)%200},
			kmsg.Fault{Kind: kmsg.Storage, Device: fmt.Sprintf("sd%d", i), Storage: kmsg.IOError},
			kmsg.Fault{Kind: kmsg.Storage, Device: "bad device\nname", Storage: kmsg.IOError},
		)
	}
	k.observe(faults)
	reg := prometheus.NewRegistry()
	reg.MustRegister(k)
	for name, most := range map[string]int{
		"lavender_gpu_xid_errors_total": (maxGPULabels + 1) * (maxXidLabels + 1),
		"lavender_storage_errors_total": maxDeviceLabels + 1,
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n > most {
			t.Errorf("%s: %d series (%v), want at most %d", name, n, err, most)
		}
	}
	mfs, _ := reg.Gather()
	total := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			total[mf.GetName()] += m.GetCounter().GetValue()
		}
	}
	if total["lavender_gpu_xid_errors_total"] != 200 || total["lavender_storage_errors_total"] != 200 {
		t.Errorf("records lost to the bounds: %v", total)
	}
	if got := testutil.ToFloat64(k.filtered(t, "0000:00:00", "1")); got != 1 {
		t.Errorf("the first GPU lost its own series: %v", got)
	}
}

// filtered collects the one Xid series of gpu and xid.
func (k *KernelLog) filtered(t *testing.T, gpu, xid string) prometheus.Collector {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.xid[[2]string{gpu, xid}]
	if !ok {
		t.Fatalf("no series gpu=%s xid=%s", gpu, xid)
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
	g.Set(v)
	return g
}
