// Package deploy holds no code, only tests: they keep alerts.yml, the
// deployment files under deploy/ and the Grafana dashboard consistent with
// each other and with the metrics lavender exports, and run promtool, amtool
// and systemd-analyze over them when those tools are installed.
//
// Regenerate deploy/kubernetes/prometheusrule.yaml after editing alerts.yml:
//
//	go test ./deploy -run TestPrometheusRule -update
package deploy

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"
)

var update = flag.Bool("update", false, "rewrite generated files (deploy/kubernetes/prometheusrule.yaml)")

// repoRoot is the module root; go test runs with deploy/ as working directory.
const repoRoot = ".."

func repoPath(parts ...string) string {
	return filepath.Join(append([]string{repoRoot}, parts...)...)
}

func readFile(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(repoPath(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeYAML parses one YAML document strictly: an unknown or misspelt field
// in a typed struct is an error, not a silently ignored key.
func decodeYAML(t *testing.T, data []byte, out any, name string) {
	t.Helper()
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
}

// decodeYAMLDocs parses every document of a multi-document YAML file into
// generic maps.
func decodeYAMLDocs(t *testing.T, data []byte, name string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for {
		var raw map[any]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		if raw == nil {
			continue
		}
		docs = append(docs, stringKeys(raw).(map[string]any))
	}
}

// stringKeys turns yaml.v2's map[any]any trees into map[string]any ones.
func stringKeys(v any) any {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[toString(k)] = stringKeys(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = stringKeys(e)
		}
		return v
	default:
		return v
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}

// dig walks a generic YAML/JSON tree along keys (map keys, or decimal
// indexes into lists) and returns nil when any step is missing.
func dig(v any, path ...string) any {
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			i := 0
			for _, r := range p {
				if r < '0' || r > '9' {
					return nil
				}
				i = i*10 + int(r-'0')
			}
			if i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

func digString(v any, path ...string) string {
	s, _ := dig(v, path...).(string)
	return s
}

// runTool runs a program and returns its combined output; a non-zero exit
// fails the test with that output.
func runTool(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// exportedMetrics are the series lavender exposes (swap, pressure, OOM
// kills, phases, the bridge's), plus Prometheus's own. Every PromQL
// expression in alerts.yml and the dashboard may use only these, so a
// misspelt metric name fails here instead of leaving a panel or an alert
// silently empty.
var exportedMetrics = map[string]bool{
	"lavender_swap_total_bytes":                           true,
	"lavender_swap_used_bytes":                            true,
	"lavender_swap_free_bytes":                            true,
	"lavender_swap_cached_bytes":                          true,
	"lavender_swap_used_ratio":                            true,
	"lavender_swap_in_bytes_total":                        true,
	"lavender_swap_out_bytes_total":                       true,
	"lavender_memory_available_ratio":                     true,
	"lavender_swap_read_errors_total":                     true,
	"lavender_pressure_memory_waiting_seconds_total":      true,
	"lavender_pressure_memory_stalled_seconds_total":      true,
	"lavender_oom_kills_total":                            true,
	"lavender_phase_active":                               true,
	"lavender_phase_start_timestamp_seconds":              true,
	"lavender_phase_last_heartbeat_timestamp_seconds":     true,
	"lavender_phase_end_timestamp_seconds":                true,
	"lavender_phase_duration_seconds":                     true,
	"lavender_phase_heartbeats_total":                     true,
	"lavender_phase_failed":                               true,
	"lavender_phase_failure_info":                         true,
	"lavender_phase_failures_total":                       true,
	"lavender_phase_last_failure_duration_seconds":        true,
	"lavender_phase_gpu":                                  true,
	"lavender_phase_step":                                 true,
	"lavender_phase_total_steps":                          true,
	"lavender_phase_last_progress_timestamp_seconds":      true,
	"lavender_phase_eta_seconds":                          true,
	"lavender_phase_last_eval_progress_timestamp_seconds": true,
	"lavender_phase_last_busy_timestamp_seconds":          true,
	"lavender_phase_loss":                                 true,
	"lavender_run_start_timestamp_seconds":                true,
	"lavender_bark_pushes_total":                          true,
	"lavender_bark_push_duration_seconds_bucket":          true,
	"lavender_bark_push_duration_seconds_sum":             true,
	"lavender_bark_push_duration_seconds_count":           true,
	"lavender_webhook_requests_total":                     true,
	"lavender_webhook_alerts_total":                       true,
	"lavender_bark_targets":                               true,
	"lavender_bark_config_last_reload_successful":         true,
	"lavender_build_info":                                 true,
	"lavender_watchdog_armed":                             true,
	"lavender_watchdog_polls_total":                       true,
	"lavender_watchdog_errors_total":                      true,
	"lavender_gpu_xid_errors_total":                       true,
	"lavender_gpu_fallen_off_bus_total":                   true,
	"lavender_storage_errors_total":                       true,
	"lavender_kernel_log_readable":                        true,
	"lavender_kernel_log_records_total":                   true,
	"lavender_kernel_log_ignored_records_total":           true,
	"lavender_kernel_log_overruns_total":                  true,
	"lavender_disk_avail_bytes":                           true,
	"lavender_disk_size_bytes":                            true,
	"lavender_disk_files":                                 true,
	"lavender_disk_files_free":                            true,
	"lavender_disk_error":                                 true,
	"lavender_disk_save_bytes":                            true,
	"lavender_disk_saving":                                true,
	// The GPU collector's (gpu/collector.go), for the GPU alerts and the
	// dashboard's GPU row.
	"lavender_gpu_lost":                                  true,
	"lavender_gpu_utilization_ratio":                     true,
	"lavender_gpu_power_watts":                           true,
	"lavender_gpu_power_limit_watts":                     true,
	"lavender_gpu_clock_event_reason_active":             true,
	"lavender_gpu_ecc_uncorrected_volatile_errors_total": true,
	"lavender_gpu_remapped_rows_pending":                 true,
	"lavender_gpu_remapped_rows_failed":                  true,
	"lavender_gpu_memory_used_bytes":                     true,
	"lavender_gpu_memory_total_bytes":                    true,
	"lavender_gpu_temperature_celsius":                   true,
	"lavender_gpu_telemetry_enabled":                     true,
	"lavender_gpu_scrape_stuck":                          true,
	"up":                                                 true,
}

var lavenderMetricRE = regexp.MustCompile(`\blavender_[a-z0-9_]+`)

// unknownMetrics lists the lavender_* names in expr that lavender does not
// export.
func unknownMetrics(expr string) []string {
	var bad []string
	for _, m := range lavenderMetricRE.FindAllString(expr, -1) {
		if !exportedMetrics[m] {
			bad = append(bad, m)
		}
	}
	sort.Strings(bad)
	return bad
}

func TestUnknownMetricsCatchesTypos(t *testing.T) {
	for expr, want := range map[string]string{
		`lavender_swap_used_ratio >= 0.5 and lavender_swap_total_bytes > 0`: "",
		`rate(lavender_swap_in_bytes_total[5m])`:                            "",
		`lavender_swap_usage_ratio > 0.5`:                                   "lavender_swap_usage_ratio",
		`rate(lavender_bark_push_duration_seconds[5m])`:                     "lavender_bark_push_duration_seconds",
	} {
		if got := strings.Join(unknownMetrics(expr), ","); got != want {
			t.Errorf("unknownMetrics(%q) = %q, want %q", expr, got, want)
		}
	}
}
