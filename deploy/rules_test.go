package deploy

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"

	"github.com/lavender-ml/lavender/watchdog"
	"github.com/lavender-ml/lavender/webhook"
)

// ruleFile is a Prometheus rule file, and the spec of a PrometheusRule.
type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Limit    int    `yaml:"limit,omitempty"`
	Rules    []rule `yaml:"rules"`
}

type rule struct {
	Alert  string `yaml:"alert,omitempty"`
	Record string `yaml:"record,omitempty"`
	Expr   string `yaml:"expr"`
	For    string `yaml:"for,omitempty"`
	// KeepFiringFor needs Prometheus 2.42 or later (Debian's bookworm has it).
	KeepFiringFor string            `yaml:"keep_firing_for,omitempty"`
	Labels        map[string]string `yaml:"labels,omitempty"`
	Annotations   map[string]string `yaml:"annotations,omitempty"`
}

type prometheusRule struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec ruleFile `yaml:"spec"`
}

func loadAlerts(t *testing.T) ruleFile {
	t.Helper()
	var f ruleFile
	decodeYAML(t, readFile(t, "alerts.yml"), &f, "alerts.yml")
	return f
}

func alertsByName(t *testing.T, f ruleFile) map[string]rule {
	t.Helper()
	m := map[string]rule{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if _, dup := m[r.Alert]; dup {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			m[r.Alert] = r
		}
	}
	return m
}

const prometheusRuleHeader = `# GENERATED from alerts.yml by
#   go test ./deploy -run TestPrometheusRule -update
# DO NOT EDIT: change alerts.yml and regenerate; go test ./deploy fails while
# the two differ.
#
# The lavender alerting rules for the Prometheus Operator.
# Use: kubectl apply -k deploy/kubernetes (see kustomization.yaml). Your
# Prometheus must select this object (ruleSelector; kube-prometheus-stack,
# for one, wants a "release: <its release name>" label here).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: lavender
  namespace: lavender
  labels:
    app.kubernetes.io/name: lavender
spec:
`

// renderPrometheusRule wraps the groups of a rule file in a PrometheusRule.
// It works on the text, indenting everything from "groups:" on, so the
// comments that explain each rule survive into the Kubernetes manifest.
func renderPrometheusRule(alerts []byte) ([]byte, error) {
	lines := strings.SplitAfter(string(alerts), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimRight(l, "\r\n") == "groups:" {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("alerts.yml: no top-level \"groups:\" line")
	}
	var b bytes.Buffer
	b.WriteString(prometheusRuleHeader)
	for _, l := range lines[start:] {
		if strings.TrimSpace(l) != "" {
			b.WriteString("  ")
		}
		b.WriteString(l)
	}
	return b.Bytes(), nil
}

func TestPrometheusRuleInSync(t *testing.T) {
	alerts := readFile(t, "alerts.yml")
	want, err := renderPrometheusRule(alerts)
	if err != nil {
		t.Fatal(err)
	}
	path := repoPath("deploy", "kubernetes", "prometheusrule.yaml")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it: go test ./deploy -run TestPrometheusRule -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("deploy/kubernetes/prometheusrule.yaml is not what alerts.yml generates; run: go test ./deploy -run TestPrometheusRule -update")
	}

	// Beyond the bytes: both must parse, and to the same rules, so that an
	// indentation slip in the generator cannot pass unnoticed.
	var pr prometheusRule
	decodeYAML(t, got, &pr, "prometheusrule.yaml")
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("prometheusrule.yaml is %s %s, want monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	if pr.Metadata.Name == "" || pr.Metadata.Namespace != "lavender" {
		t.Errorf("prometheusrule.yaml metadata = %+v, want a name in namespace lavender", pr.Metadata)
	}
	file := loadAlerts(t)
	if !reflect.DeepEqual(pr.Spec, file) {
		t.Errorf("PrometheusRule spec differs from alerts.yml:\n got %+v\nwant %+v", pr.Spec, file)
	}
}

// TestRenderPrometheusRuleKeepsRules guards the generator itself on a rule
// file with block scalars and comments, and on one without groups.
func TestRenderPrometheusRuleKeepsRules(t *testing.T) {
	in := "# head\ngroups:\n  - name: g\n    rules:\n      # why\n      - alert: A\n        expr: >-\n          up\n          == 0\n\n        annotations:\n          summary: '{{ $labels.instance }}'\n"
	out, err := renderPrometheusRule([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	decodeYAML(t, out, &pr, "rendered")
	want := ruleFile{Groups: []ruleGroup{{Name: "g", Rules: []rule{{
		Alert: "A", Expr: "up == 0", Annotations: map[string]string{"summary": "{{ $labels.instance }}"},
	}}}}}
	if !reflect.DeepEqual(pr.Spec, want) {
		t.Errorf("rendered spec = %+v, want %+v", pr.Spec, want)
	}
	if !strings.Contains(string(out), "      # why\n") {
		t.Errorf("comment lost or misindented:\n%s", out)
	}
	if _, err := renderPrometheusRule([]byte("rules: []\n")); err == nil {
		t.Error("a file without groups rendered without error")
	}
}

// TestAlertsShape checks what the docs promise of each alert and what the webhook
// relies on; promtool's unit tests (alerts_test.yml) check the behaviour.
func TestAlertsShape(t *testing.T) {
	f := loadAlerts(t)
	if len(f.Groups) != 1 || f.Groups[0].Name != "lavender" {
		t.Fatalf("alerts.yml groups = %d, want one group named lavender", len(f.Groups))
	}
	alerts := alertsByName(t, f)

	tests := []struct {
		alert       string
		exprHas     []string
		forAtLeast  time.Duration
		forAtMost   time.Duration
		annotations []string
	}{
		{
			alert:       "SwapUsageHigh",
			exprHas:     []string{"lavender_swap_used_ratio >= 0.5", "and lavender_swap_total_bytes > 0"},
			forAtLeast:  time.Second,
			forAtMost:   2 * time.Minute,
			annotations: []string{"summary", "description", "swap_used_ratio", "swap_used_bytes", "swap_total_bytes", "swap_threshold_ratio"},
		},
		{
			alert:       "PhaseStalled",
			exprHas:     []string{"time() - lavender_phase_last_heartbeat_timestamp_seconds > 600", "and on(instance, job, phase) lavender_phase_active == 1"},
			annotations: []string{"summary", "description", "phase", "stalled_seconds"},
		},
		{
			alert: "PhaseProgressStalled",
			exprHas: []string{"time() - (lavender_phase_last_progress_timestamp_seconds", "lavender_phase_start_timestamp_seconds", "lavender_phase_total_steps)) > 600",
				"time() - lavender_phase_last_heartbeat_timestamp_seconds <= 600", "lavender_phase_active == 1"},
			annotations: []string{"summary", "description", "phase", "stalled_seconds", "step", "total_steps"},
		},
		{
			alert:       "PhaseFailed",
			exprHas:     []string{"lavender_phase_duration_seconds", "lavender_phase_failed == 1", "changes(lavender_phase_end_timestamp_seconds[5m])", "sum_over_time(up[5m])"},
			annotations: []string{"summary", "description", "phase", "duration_seconds", "reason"},
		},
		{
			alert:       "PhaseLossNotFinite",
			exprHas:     []string{"lavender_phase_loss != lavender_phase_loss", "lavender_phase_loss == +Inf", "lavender_phase_loss == -Inf", "lavender_phase_active == 1", "lavender_phase_loss offset 5m"},
			annotations: []string{"summary", "description", "phase", "loss", "step", "total_steps"},
		},
		{
			alert:       "LavenderDown",
			exprHas:     []string{`up{job="lavender"} == 0`},
			forAtLeast:  5 * time.Minute,
			forAtMost:   5 * time.Minute,
			annotations: []string{"summary", "description"},
		},
		{
			alert:       "MemoryPressureHigh",
			exprHas:     []string{"rate(lavender_pressure_memory_waiting_seconds_total[1m]) >= 0.1"},
			forAtLeast:  time.Minute,
			forAtMost:   time.Minute,
			annotations: []string{"summary", "description", "pressure_ratio", "pressure_window_seconds", "swap_used_bytes", "swap_total_bytes"},
		},
		{
			alert:       "OOMKill",
			exprHas:     []string{"increase(lavender_oom_kills_total[5m]) > 0"},
			annotations: []string{"summary", "description", "oom_kills", "active_phase", "swap_used_bytes", "swap_total_bytes"},
		},
		{
			alert:       "SwapThrashing",
			exprHas:     []string{"rate(lavender_swap_in_bytes_total["},
			forAtLeast:  5 * time.Minute,
			annotations: []string{"summary", "description"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.alert, func(t *testing.T) {
			r, ok := alerts[tc.alert]
			if !ok {
				t.Fatalf("alert %s missing from alerts.yml", tc.alert)
			}
			for _, s := range tc.exprHas {
				if !strings.Contains(r.Expr, s) {
					t.Errorf("expr %q lacks %q", r.Expr, s)
				}
			}
			if tc.forAtLeast > 0 || tc.forAtMost > 0 {
				d, err := time.ParseDuration(r.For)
				if err != nil {
					t.Fatalf("for %q: %v", r.For, err)
				}
				if d < tc.forAtLeast || (tc.forAtMost > 0 && d > tc.forAtMost) {
					t.Errorf("for = %s, want between %s and %s", d, tc.forAtLeast, tc.forAtMost)
				}
			}
			if r.Labels["severity"] != "warning" {
				t.Errorf("severity = %q, want warning", r.Labels["severity"])
			}
			for _, a := range tc.annotations {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("annotation %s missing", a)
				}
			}
		})
	}

	// The numbers the webhook parses must stay machine-readable: no
	// humanize* (which prints "16.3Gi"), and byte figures through %.0f,
	// since a bare float64 prints as 1.8554258719e+10.
	for _, tc := range []struct {
		alert   string
		numbers []string // annotations the webhook parses as numbers
	}{
		{"SwapUsageHigh", []string{"swap_used_ratio", "swap_used_bytes", "swap_total_bytes", "swap_threshold_ratio"}},
		{"MemoryPressureHigh", []string{"pressure_ratio", "pressure_window_seconds", "swap_used_bytes", "swap_total_bytes"}},
		{"OOMKill", []string{"oom_kills", "swap_used_bytes", "swap_total_bytes"}},
		{"PhaseProgressStalled", []string{"stalled_seconds", "step", "total_steps"}},
		{"PhaseFailed", []string{"duration_seconds"}},
		{"PhaseLossNotFinite", []string{"step", "total_steps"}},
	} {
		r := alerts[tc.alert]
		for _, a := range tc.numbers {
			if strings.Contains(r.Annotations[a], "humanize") {
				t.Errorf("%s annotation %s uses humanize: %q", tc.alert, a, r.Annotations[a])
			}
		}
		for a, metric := range map[string]string{"swap_used_bytes": "lavender_swap_used_bytes", "swap_total_bytes": "lavender_swap_total_bytes"} {
			if !slices.Contains(tc.numbers, a) {
				continue // the phase alerts carry no swap figures
			}
			v := r.Annotations[a]
			for _, s := range []string{metric + "{instance=%q,job=%q}", "$labels.instance $labels.job | query", `printf "%.0f"`} {
				if !strings.Contains(v, s) {
					t.Errorf("%s annotation %s = %q lacks %q", tc.alert, a, v, s)
				}
			}
		}
	}
	// A ratio through %v could print as 1e-05; printf keeps it decimal.
	if v := alerts["MemoryPressureHigh"].Annotations["pressure_ratio"]; !strings.Contains(v, `printf "%.4f" $value`) {
		t.Errorf("MemoryPressureHigh pressure_ratio = %q, want printf \"%%.4f\" $value", v)
	}
	// Whole numbers (bytes, counts, seconds, steps) through %.0f: a bare
	// float64 prints 1.5e+06 for a step of 1500000.
	for _, w := range []struct{ alert, annotation string }{
		{"OOMKill", "oom_kills"},
		{"PhaseProgressStalled", "stalled_seconds"},
		{"PhaseProgressStalled", "step"},
		{"PhaseProgressStalled", "total_steps"},
		{"PhaseFailed", "duration_seconds"},
		{"PhaseLossNotFinite", "step"},
		{"PhaseLossNotFinite", "total_steps"},
		{"DiskSaveWillNotFit", "avail_bytes"},
		{"DiskSaveWillNotFit", "save_bytes"},
		{"DiskSpaceLow", "avail_bytes"},
		{"DiskSpaceLow", "size_bytes"},
		{"DiskInodesLow", "files_free"},
		{"DiskInodesLow", "files"},
	} {
		if v := alerts[w.alert].Annotations[w.annotation]; !strings.Contains(v, `printf "%.0f"`) {
			t.Errorf("%s %s = %q, want a whole number through printf \"%%.0f\"", w.alert, w.annotation, v)
		}
	}
	// The phase and disk annotations look up the alert's own phase or path
	// on its own host.
	for _, w := range []struct{ alert, annotation, metric, label string }{
		{"PhaseProgressStalled", "step", "lavender_phase_step", "phase"},
		{"PhaseProgressStalled", "total_steps", "lavender_phase_total_steps", "phase"},
		{"PhaseLossNotFinite", "step", "lavender_phase_step", "phase"},
		{"PhaseLossNotFinite", "total_steps", "lavender_phase_total_steps", "phase"},
		{"PhaseFailed", "reason", "lavender_phase_failure_info", "phase"},
		{"DiskSaveWillNotFit", "save_bytes", "lavender_disk_save_bytes", "path"},
		{"DiskSpaceLow", "avail_bytes", "lavender_disk_avail_bytes", "path"},
		{"DiskSpaceLow", "size_bytes", "lavender_disk_size_bytes", "path"},
		{"DiskInodesLow", "files_free", "lavender_disk_files_free", "path"},
		{"DiskInodesLow", "files", "lavender_disk_files", "path"},
	} {
		v := alerts[w.alert].Annotations[w.annotation]
		if !strings.Contains(v, w.metric+"{instance=%q,job=%q,"+w.label+"=%q}") || !strings.Contains(v, "$labels.instance $labels.job $labels."+w.label+" | query") {
			t.Errorf("%s %s = %q, want a query of %s for the alert's instance, job and %s", w.alert, w.annotation, v, w.metric, w.label)
		}
	}
	for _, name := range []string{"PhaseProgressStalled", "PhaseFailed", "PhaseLossNotFinite"} {
		if v := alerts[name].Annotations["phase"]; v != "{{ $labels.phase }}" {
			t.Errorf("%s phase annotation = %q, want {{ $labels.phase }}", name, v)
		}
	}

	for name, r := range alerts {
		if bad := unknownMetrics(r.Expr); len(bad) > 0 {
			t.Errorf("alert %s uses metrics lavender does not export: %v", name, bad)
		}
		for a, v := range r.Annotations {
			if bad := unknownMetrics(v); len(bad) > 0 {
				t.Errorf("alert %s annotation %s uses metrics lavender does not export: %v", name, a, bad)
			}
		}
	}
}

// swapThresholdsExpr is SwapUsageHigh's two thresholds in its expr: the
// ratio it fires at, then the one it holds down to once firing.
var swapThresholdsExpr = regexp.MustCompile(`(?s)lavender_swap_used_ratio >= ([0-9.]+).*lavender_swap_used_ratio >= ([0-9.]+)\s+and on\(instance, job\) ALERTS\{alertname="SwapUsageHigh"`)

// TestSwapThresholdAnnotationIsTheExprs: the resolution of SwapUsageHigh
// says swap is back under swap_threshold_ratio, which is only true while it
// is the ratio the expr holds down to; and that hold is serve's watchdog's,
// its threshold less its hysteresis, so both paths re-arm alike.
func TestSwapThresholdAnnotationIsTheExprs(t *testing.T) {
	r := alertsByName(t, loadAlerts(t))["SwapUsageHigh"]
	m := swapThresholdsExpr.FindStringSubmatch(r.Expr)
	if m == nil {
		t.Fatalf("SwapUsageHigh expr %q has no lavender_swap_used_ratio >= N or, once firing, >= M", r.Expr)
	}
	if got := r.Annotations["swap_threshold_ratio"]; got != m[2] {
		t.Errorf("SwapUsageHigh swap_threshold_ratio = %q, but its expr resolves under %s", got, m[2])
	}
	fire, err1 := strconv.ParseFloat(m[1], 64)
	hold, err2 := strconv.ParseFloat(m[2], 64)
	if err1 != nil || err2 != nil || fire != watchdog.DefaultThreshold || math.Abs(fire-hold-watchdog.DefaultHysteresis) > 1e-9 {
		t.Errorf("SwapUsageHigh fires at %s and holds down to %s; the watchdog fires at %g and re-arms %g under it", m[1], m[2], watchdog.DefaultThreshold, watchdog.DefaultHysteresis)
	}
}

// TestDiskUnreadableForIsTheRules: the bridge counts DiskUnreadable's
// `for` into how long a path has been unreadable, since Prometheus sets
// startsAt only once it has passed.
func TestDiskUnreadableForIsTheRules(t *testing.T) {
	r := alertsByName(t, loadAlerts(t))["DiskUnreadable"]
	d, err := time.ParseDuration(r.For)
	if err != nil || d != webhook.DiskUnreadableFor {
		t.Errorf("DiskUnreadable's for is %q (%v), webhook.DiskUnreadableFor %s: keep them one", r.For, err, webhook.DiskUnreadableFor)
	}
}

// TestRuleUnitTestsCoverEveryAlert makes sure no alert in alerts.yml goes
// without a promtool unit test.
func TestRuleUnitTestsCoverEveryAlert(t *testing.T) {
	var tf struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name          string `yaml:"name"`
			AlertRuleTest []struct {
				AlertName string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	// Decode leniently into the subset above; promtool checks the rest.
	if err := yaml.Unmarshal(readFile(t, "alerts_test.yml"), &tf); err != nil {
		t.Fatal(err)
	}
	if len(tf.RuleFiles) != 1 || tf.RuleFiles[0] != "alerts.yml" {
		t.Errorf("alerts_test.yml rule_files = %v, want [alerts.yml]", tf.RuleFiles)
	}
	firing := map[string]bool{}
	silent := map[string]bool{}
	for _, c := range tf.Tests {
		for _, a := range c.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.AlertName] = true
			} else {
				silent[a.AlertName] = true
			}
		}
	}
	for name := range alertsByName(t, loadAlerts(t)) {
		if !firing[name] {
			t.Errorf("no promtool test expects %s to fire", name)
		}
		if !silent[name] {
			t.Errorf("no promtool test expects %s to stay silent", name)
		}
	}
}

// TestGPUAlertsClearAsTheWatchdog: GPUHung and GPUHardwareSlowdown end
// only once their condition has been gone for the watchdog's
// GPUClearAfter, so one dipped reading resolves neither.
func TestGPUAlertsClearAsTheWatchdog(t *testing.T) {
	alerts := alertsByName(t, loadAlerts(t))
	for _, name := range []string{"GPUHung", "GPUHardwareSlowdown"} {
		d, err := time.ParseDuration(alerts[name].KeepFiringFor)
		if err != nil || d != watchdog.GPUClearAfter {
			t.Errorf("%s's keep_firing_for is %q (%v), the watchdog's GPUClearAfter %s: keep them one", name, alerts[name].KeepFiringFor, err, watchdog.GPUClearAfter)
		}
	}
}
