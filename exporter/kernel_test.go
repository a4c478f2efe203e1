package exporter

import (
	"bufio"
	"fmt"
	"maps"
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

// TestKernelLogCountsOneGPULossOnce: the driver reports a lost GPU as Xid
// 79 and again without an Xid moments later; the counter of GPUs fallen
// off the bus counts that loss once, and real repeats each time.
func TestKernelLogCountsOneGPULossOnce(t *testing.T) {
	const a, b = "0000:3b:00", "0000:5e:00"
	xid79 := func(gpu string, sec float64) kmsg.Fault {
		return kmsg.Fault{Kind: kmsg.Xid, Xid: kmsg.XidFallenOffBus, GPU: gpu, Usec: uint64(sec * 1e6)}
	}
	bus := func(gpu string, sec float64) kmsg.Fault {
		return kmsg.Fault{Kind: kmsg.FallenOffBus, GPU: gpu, Usec: uint64(sec * 1e6)}
	}
	for _, tc := range []struct {
		name   string
		faults []kmsg.Fault
		want   map[string]float64
	}{
		{"Xid 79, then the message", []kmsg.Fault{xid79(a, 100), bus(a, 100.01)}, map[string]float64{a: 1}},
		{"the message, then Xid 79", []kmsg.Fault{bus(a, 100), xid79(a, 104.9)}, map[string]float64{a: 1}},
		{"the two forms 6 s apart", []kmsg.Fault{xid79(a, 100), bus(a, 106)}, map[string]float64{a: 2}},
		{"Xid 79 twice", []kmsg.Fault{xid79(a, 100), xid79(a, 100.5)}, map[string]float64{a: 2}},
		{"the message twice", []kmsg.Fault{bus(a, 100), bus(a, 101)}, map[string]float64{a: 2}},
		{"two GPUs, one form each", []kmsg.Fault{xid79(a, 100), bus(b, 100.01)}, map[string]float64{a: 1, b: 1}},
		{"a loss and its echo, then a second loss", []kmsg.Fault{xid79(a, 100), bus(a, 100.01), xid79(a, 400), bus(a, 400.02)}, map[string]float64{a: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := NewKernelLog()
			k.observe(tc.faults)
			k.mu.Lock()
			got := maps.Clone(k.fallen)
			k.mu.Unlock()
			if !maps.Equal(got, tc.want) {
				t.Errorf("fallen off the bus %v, want %v", got, tc.want)
			}
		})
	}
}
