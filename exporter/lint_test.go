package exporter

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// swap54Registry registers the swap collector on the swap54 fake procfs,
// where meminfo, vmstat and PSI all have figures.
func swap54Registry(t *testing.T) *prometheus.Registry {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewSwapCollector("testdata/procfs/swap54", testPageSize, nil))
	return reg
}

func TestGatherAndLint(t *testing.T) {
	reg := swap54Registry(t)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	// The lint covered the pressure and OOM counters too.
	for _, name := range []string{"lavender_pressure_memory_waiting_seconds_total",
		"lavender_pressure_memory_stalled_seconds_total", "lavender_oom_kills_total"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
			t.Errorf("%s: %d samples (%v), want 1", name, n, err)
		}
	}
}

// promtool check metrics on a real scrape over HTTP, with the Go and
// process collectors that `lavender exporter` adds.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := testkit.NeedTool(t, "prometheus", "promtool")
	reg := swap54Registry(t)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
	for _, name := range []string{"lavender_swap_used_ratio", "lavender_pressure_memory_waiting_seconds_total", "lavender_oom_kills_total"} {
		if !bytes.Contains(scrape.Bytes(), []byte(name)) {
			t.Errorf("scrape lacks %s", name)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = &scrape
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
