//go:build cgo

package gpu

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// Every metric of a healthy GPU, one with nothing but memory supported,
// and a lost one.
func TestCollectorMetrics(t *testing.T) {
	ns := nvml.ERROR_NOT_SUPPORTED
	srv := testServer(3, func(i int, r *reading) {
		switch i {
		case 0:
			r.reasons = nvml.ClocksEventReasonSwPowerCap | nvml.ClocksThrottleReasonHwThermalSlowdown
			r.eccVolatile, r.eccAggr = 1, 5
			r.remapPending = true
		case 1:
			r.utilRet, r.powRet, r.limitRet, r.tempRet, r.reasonRet = ns, ns, ns, ns, ns
			r.eccRet, r.remapRet, r.procRet, r.gfRet = ns, ns, ns, ns
		case 2:
			r.utilRet = nvml.ERROR_GPU_IS_LOST
		}
	})
	c := NewCollector(openTest(t, srv, Options{}), nil)
	total := srv.Devices[0].(interface {
		GetMemoryInfo() (nvml.Memory, nvml.Return)
	})
	m, _ := total.GetMemoryInfo()
	if m.Total != 151397597184 {
		t.Fatalf("the mock's H200 has %d bytes; the expected text says 151397597184", m.Total)
	}
	// The text format sorts labels by name.
	const (
		g0, u0     = `gpu="0",pci_bus_id="0000:18:00"`, `uuid="GPU-00000000-0000-0000-0000-000000000000"`
		g1, u1     = `gpu="1",pci_bus_id="0000:2a:00"`, `uuid="GPU-00000000-0000-0000-0000-000000000001"`
		g2, u2     = `gpu="2",pci_bus_id="0000:3a:00"`, `uuid="GPU-00000000-0000-0000-0000-000000000002"`
		l0, l1, l2 = g0 + "," + u0, g1 + "," + u1, g2 + "," + u2
	)
	want := `
# HELP lavender_gpu_clock_event_reason_active 1 while the reason holds the GPU's clocks below their maximum (NVML's clock event reasons), else 0.
# TYPE lavender_gpu_clock_event_reason_active gauge
lavender_gpu_clock_event_reason_active{` + g0 + `,reason="applications_clocks_setting",` + u0 + `} 0
lavender_gpu_clock_event_reason_active{` + g0 + `,reason="display_clock_setting",` + u0 + `} 0
lavender_gpu_clock_event_reason_active{` + g0 + `,reason="gpu_idle",` + u0 + `} 0
lavender_gpu_clock_event_reason_active{` + g0 + `,reason="hw_power_brake_slowdown",` + u0 + `} 0
lavender_gpu_clock_event_reason_active{` + g0 + `,reason="hw_slowdown",` + u0 + `} 0
lavender_gpu_clock_event_reason_active{` + g0 + `,reason="hw_thermal_slowdown",` + u0 + `} 1
lavender_gpu_clock_event_reason_active{` + g0 + `,reason="sw_power_cap",` + u0 + `} 1
lavender_gpu_clock_event_reason_active{` + g0 + `,reason="sw_thermal_slowdown",` + u0 + `} 0
lavender_gpu_clock_event_reason_active{` + g0 + `,reason="sync_boost",` + u0 + `} 0
# HELP lavender_gpu_ecc_uncorrected_aggregate_errors_total Uncorrected ECC errors over the GPU's life.
# TYPE lavender_gpu_ecc_uncorrected_aggregate_errors_total counter
lavender_gpu_ecc_uncorrected_aggregate_errors_total{` + l0 + `} 5
# HELP lavender_gpu_ecc_uncorrected_volatile_errors_total Uncorrected ECC errors since the driver loaded.
# TYPE lavender_gpu_ecc_uncorrected_volatile_errors_total counter
lavender_gpu_ecc_uncorrected_volatile_errors_total{` + l0 + `} 1
# HELP lavender_gpu_info A GPU NVML sees, with its name; always 1.
# TYPE lavender_gpu_info gauge
lavender_gpu_info{gpu="0",name="NVIDIA H200 141GB HBM3e",pci_bus_id="0000:18:00",` + u0 + `} 1
lavender_gpu_info{gpu="1",name="NVIDIA H200 141GB HBM3e",pci_bus_id="0000:2a:00",` + u1 + `} 1
lavender_gpu_info{gpu="2",name="NVIDIA H200 141GB HBM3e",pci_bus_id="0000:3a:00",` + u2 + `} 1
# HELP lavender_gpu_lost 1 when NVML answers ERROR_GPU_IS_LOST for the GPU (fallen off the bus); its other readings are then absent.
# TYPE lavender_gpu_lost gauge
lavender_gpu_lost{` + l0 + `} 0
lavender_gpu_lost{` + l1 + `} 0
lavender_gpu_lost{` + l2 + `} 1
# HELP lavender_gpu_memory_total_bytes Device memory in total.
# TYPE lavender_gpu_memory_total_bytes gauge
lavender_gpu_memory_total_bytes{` + l0 + `} 1.51397597184e+11
lavender_gpu_memory_total_bytes{` + l1 + `} 1.51397597184e+11
# HELP lavender_gpu_memory_used_bytes Device memory allocated, not counting what the driver reserves.
# TYPE lavender_gpu_memory_used_bytes gauge
lavender_gpu_memory_used_bytes{` + l0 + `} 8.589934592e+10
lavender_gpu_memory_used_bytes{` + l1 + `} 8.589934592e+10
# HELP lavender_gpu_memory_utilization_ratio Fraction of NVML's last sample period in which device memory was read or written.
# TYPE lavender_gpu_memory_utilization_ratio gauge
lavender_gpu_memory_utilization_ratio{` + l0 + `} 0.41
# HELP lavender_gpu_power_limit_watts The power limit the GPU enforces.
# TYPE lavender_gpu_power_limit_watts gauge
lavender_gpu_power_limit_watts{` + l0 + `} 700
# HELP lavender_gpu_power_watts Power the GPU draws (a 1-s average on Ampere, except GA100, and newer).
# TYPE lavender_gpu_power_watts gauge
lavender_gpu_power_watts{` + l0 + `} 650.5
# HELP lavender_gpu_processes Processes running on the GPU (compute and graphics).
# TYPE lavender_gpu_processes gauge
lavender_gpu_processes{` + l0 + `} 2
# HELP lavender_gpu_remapped_rows_failed 1 when a row remap failed: the GPU should be replaced.
# TYPE lavender_gpu_remapped_rows_failed gauge
lavender_gpu_remapped_rows_failed{` + l0 + `} 0
# HELP lavender_gpu_remapped_rows_pending 1 when a row remap waits for the next GPU reset.
# TYPE lavender_gpu_remapped_rows_pending gauge
lavender_gpu_remapped_rows_pending{` + l0 + `} 1
# HELP lavender_gpu_remapped_rows_total Memory rows the GPU remapped, by the kind of error that caused it (correctable, uncorrectable).
# TYPE lavender_gpu_remapped_rows_total counter
lavender_gpu_remapped_rows_total{cause="correctable",` + l0 + `} 3
lavender_gpu_remapped_rows_total{cause="uncorrectable",` + l0 + `} 1
# HELP lavender_gpu_scrape_success 1 when the NVML pass read every supported reading of every GPU that is not lost, 0 when a call failed or the pass is stuck.
# TYPE lavender_gpu_scrape_success gauge
lavender_gpu_scrape_success 1
# HELP lavender_gpu_scrape_stuck 1 while an NVML pass has run past its deadline without returning (a GPU or the driver stuck): the GPUs' readings are absent, their info and lost series are the last complete pass's, and the duration is how long the pass has run.
# TYPE lavender_gpu_scrape_stuck gauge
lavender_gpu_scrape_stuck 0
# HELP lavender_gpu_telemetry_enabled 1 when GPU telemetry reads NVML; 0 with the reason (no_cgo, no_driver, no_gpu, disabled, nvml_error, closed) when it does not.
# TYPE lavender_gpu_telemetry_enabled gauge
lavender_gpu_telemetry_enabled{reason=""} 1
# HELP lavender_gpu_temperature_celsius The GPU die's temperature.
# TYPE lavender_gpu_temperature_celsius gauge
lavender_gpu_temperature_celsius{` + l0 + `} 61
# HELP lavender_gpu_utilization_ratio Fraction of NVML's last sample period (1/6 s to 1 s) in which one or more kernels ran on the GPU.
# TYPE lavender_gpu_utilization_ratio gauge
lavender_gpu_utilization_ratio{` + l0 + `} 0.97
`
	// Every metric but the pass's duration, which the clock decides.
	names := []string{"lavender_gpu_clock_event_reason_active", "lavender_gpu_ecc_uncorrected_aggregate_errors_total",
		"lavender_gpu_ecc_uncorrected_volatile_errors_total", "lavender_gpu_info", "lavender_gpu_lost",
		"lavender_gpu_memory_total_bytes", "lavender_gpu_memory_used_bytes", "lavender_gpu_memory_utilization_ratio",
		"lavender_gpu_power_limit_watts", "lavender_gpu_power_watts", "lavender_gpu_processes",
		"lavender_gpu_remapped_rows_failed", "lavender_gpu_remapped_rows_pending", "lavender_gpu_remapped_rows_total",
		"lavender_gpu_scrape_stuck", "lavender_gpu_scrape_success", "lavender_gpu_telemetry_enabled", "lavender_gpu_temperature_celsius",
		"lavender_gpu_utilization_ratio"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "lavender_gpu_scrape_duration_seconds"); n != 1 {
		t.Errorf("%d scrape duration series", n)
	}
	// The test names every metric the collector describes.
	descs := make(chan *prometheus.Desc, 64)
	c.Describe(descs)
	close(descs)
	described := 0
	for d := range descs {
		described++
		if !strings.Contains(d.String(), `fqName: "lavender_gpu_scrape_duration_seconds"`) && !containsName(d.String(), names) {
			t.Errorf("untested metric %s", d)
		}
	}
	if described != len(names)+1 {
		t.Errorf("%d metrics described, %d tested", described, len(names)+1)
	}
}

func containsName(desc string, names []string) bool {
	for _, n := range names {
		if strings.Contains(desc, `fqName: "`+n+`"`) {
			return true
		}
	}
	return false
}

func TestCollectorScrapeFailure(t *testing.T) {
	srv := testServer(1, func(_ int, r *reading) { r.tempRet = nvml.ERROR_UNKNOWN })
	c := NewCollector(openTest(t, srv, Options{}), nil)
	want := `
# HELP lavender_gpu_scrape_success 1 when the NVML pass read every supported reading of every GPU that is not lost, 0 when a call failed or the pass is stuck.
# TYPE lavender_gpu_scrape_success gauge
lavender_gpu_scrape_success 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "lavender_gpu_scrape_success"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "lavender_gpu_temperature_celsius"); n != 0 {
		t.Errorf("a failed reading exported %d series", n)
	}
}

func TestCollectorAfterClose(t *testing.T) {
	r, err := open(testServer(1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCollector(r, nil)
	r.Close()
	want := `
# HELP lavender_gpu_telemetry_enabled 1 when GPU telemetry reads NVML; 0 with the reason (no_cgo, no_driver, no_gpu, disabled, nvml_error, closed) when it does not.
# TYPE lavender_gpu_telemetry_enabled gauge
lavender_gpu_telemetry_enabled{reason="closed"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestCollectorLint(t *testing.T) {
	c := NewCollector(openTest(t, testServer(8), Options{}), nil)
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err != nil {
		t.Errorf("pedantic registry: %v", err)
	}
}

// promtool check metrics on a real scrape of eight GPUs.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := testkit.NeedTool(t, "prometheus", "promtool")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(openTest(t, testServer(8), Options{}), nil))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var scrape bytes.Buffer
	if _, err := scrape.ReadFrom(resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	if n := bytes.Count(scrape.Bytes(), []byte("lavender_gpu_info{")); n != 8 {
		t.Errorf("scrape has %d GPUs", n)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = &scrape
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
