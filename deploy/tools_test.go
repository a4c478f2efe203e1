package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// These tests run the real checkers of Debian's prometheus,
// prometheus-alertmanager and systemd packages over the files. CI installs
// the first two and sets LAVENDER_E2E=1, so a missing tool fails there.

func TestPromtoolCheckRules(t *testing.T) {
	t.Parallel()
	promtool := testkit.NeedTool(t, "prometheus", "promtool")
	out := runTool(t, repoRoot, promtool, "check", "rules", "alerts.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check rules printed no SUCCESS:\n%s", out)
	}
}

func TestPromtoolTestRules(t *testing.T) {
	t.Parallel()
	promtool := testkit.NeedTool(t, "prometheus", "promtool")
	out := runTool(t, repoRoot, promtool, "test", "rules", "alerts_test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules printed no SUCCESS:\n%s", out)
	}
}

func TestPromtoolCheckConfig(t *testing.T) {
	t.Parallel()
	promtool := testkit.NeedTool(t, "prometheus", "promtool")
	out := runTool(t, repoRoot, promtool, "check", "config", filepath.Join("deploy", "prometheus", "prometheus.yml"))
	// check config also loads the rule files it names; make sure that is
	// the repository's alerts.yml and not zero files.
	if !strings.Contains(out, "1 rule files found") || !strings.Contains(out, "alerts.yml") {
		t.Errorf("prometheus.yml does not load alerts.yml:\n%s", out)
	}
}

func TestAmtoolCheckConfig(t *testing.T) {
	t.Parallel()
	amtool := testkit.NeedTool(t, "prometheus-alertmanager", "amtool")
	out := runTool(t, repoRoot, amtool, "check-config", filepath.Join("deploy", "alertmanager", "alertmanager.yml"))
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("amtool check-config printed no SUCCESS:\n%s", out)
	}
}

// TestAmtoolRoutes asks Alertmanager's own routing code where each alert
// goes, so a route typo cannot send the swap warning to the wrong place.
func TestAmtoolRoutes(t *testing.T) {
	t.Parallel()
	amtool := testkit.NeedTool(t, "prometheus-alertmanager", "amtool")
	config := filepath.Join("deploy", "alertmanager", "alertmanager.yml")
	for labels, want := range map[string]string{
		"alertname=SwapUsageHigh":        "bark",
		"alertname=PhaseStalled":         "bark",
		"alertname=PhaseProgressStalled": "bark",
		"alertname=PhaseFailed":          "bark",
		"alertname=PhaseFailedd":         "default",
		"alertname=MemoryPressureHigh":   "bark",
		"alertname=OOMKill":              "bark",
		"alertname=OOMKills":             "default",
		"alertname=PhaseLossNotFinite":   "bark",
		"alertname=DiskSaveWillNotFit":   "bark",
		"alertname=DiskSpaceLow":         "bark",
		"alertname=DiskInodesLow":        "bark",
		"alertname=DiskUnreadable":       "bark",
		"alertname=DiskSpace":            "default",
		"alertname=GPUXidError":          "bark",
		"alertname=GPUFallenOffBus":      "bark",
		"alertname=StorageErrors":        "bark",
		"alertname=KernelLogUnreadable":  "default",
		"alertname=LavenderDown":         "default",
		"alertname=SwapThrashing":        "default",
		"alertname=SwapUsageHigher":      "default",
	} {
		// stdout only: amtool warns on stderr that --config.file wins
		// over --alertmanager.url.
		cmd := exec.Command(amtool, "config", "routes", "test", "--config.file="+config, labels)
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("amtool config routes test %s: %v", labels, err)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("%s routes to %q, want %q", labels, got, want)
		}
	}
}

// TestPromtoolDashboardExpressions parses every dashboard expression with
// Prometheus's own parser, by way of a throwaway recording-rule file.
func TestPromtoolDashboardExpressions(t *testing.T) {
	t.Parallel()
	promtool := testkit.NeedTool(t, "prometheus", "promtool")
	var rules []rule
	for i, e := range dashboardExprs(t) {
		rules = append(rules, rule{
			Record: fmt.Sprintf("lavender_dashboard_expr_%d", i),
			Expr:   expandGrafanaVars(e.Expr, "1m"),
		})
	}
	data := marshalYAML(t, ruleFile{Groups: []ruleGroup{{Name: "dashboard", Rules: rules}}})
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, "", promtool, "check", "rules", path)
}

// TestSystemdVerify runs systemd-analyze verify on the unit. It exists
// wherever systemd does, so its absence only skips, even in CI.
func TestSystemdVerify(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found: cannot verify deploy/systemd/lavender.service here")
	}
	unit := string(readFile(t, "deploy", "systemd", "lavender.service"))
	const binary = "/usr/local/bin/lavender"
	if !strings.Contains(unit, "ExecStart="+binary+" ") {
		t.Fatalf("ExecStart no longer runs %s; update this test", binary)
	}
	// verify insists that ExecStart's binary exists and is executable.
	dir := t.TempDir()
	fake := filepath.Join(dir, "lavender")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lavender.service")
	if err := os.WriteFile(path, []byte(strings.Replace(unit, "ExecStart="+binary, "ExecStart="+fake, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "--man=no", path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "System has not been booted with systemd") ||
			strings.Contains(string(out), "Failed to initialize manager") {
			t.Skipf("systemd-analyze cannot run in this environment:\n%s", out)
		}
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// verify exits 0 on unknown keys and bad values, with a warning; any
	// line about our unit is a defect. Lines about the host's own units are
	// not ours to judge.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "lavender.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}

// TestSystemdUnitHardening keeps the unit's safety settings from being
// dropped by an edit; it needs no tool.
func TestSystemdUnitHardening(t *testing.T) {
	unit := string(readFile(t, "deploy", "systemd", "lavender.service"))
	settings := map[string]bool{}
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		settings[line] = true
	}
	for _, want := range []string{
		"DynamicUser=yes",
		"StateDirectory=lavender",
		"ProtectSystem=strict",
		"ProtectHome=yes",
		"NoNewPrivileges=yes",
		"PrivateTmp=yes",
		// The one capability it keeps: reading the kernel log.
		"CapabilityBoundingSet=CAP_SYSLOG",
		"AmbientCapabilities=CAP_SYSLOG",
		"BindReadOnlyPaths=/dev/kmsg",
		"DeviceAllow=/dev/kmsg r",
		"RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK",
		"SystemCallFilter=@system-service",
	} {
		if !settings[want] {
			t.Errorf("lavender.service lacks %q", want)
		}
	}
	// ProtectKernelLogs=yes would hide /dev/kmsg and drop CAP_SYSLOG.
	if settings["ProtectKernelLogs=yes"] {
		t.Error("lavender.service sets ProtectKernelLogs=yes, which hides the kernel log from lavender")
	}
	// ProtectProc= other than default hides the phases' processes, run by
	// other users: their deaths would go unseen.
	for line := range settings {
		if strings.HasPrefix(line, "ProtectProc=") && line != "ProtectProc=default" {
			t.Errorf("lavender.service sets %q, which hides the processes of phases run by other users from lavender", line)
		}
	}
	// ProcSubset=pid would hide /proc/meminfo and /proc/vmstat.
	for line := range settings {
		if strings.HasPrefix(line, "ProcSubset=") && !strings.HasSuffix(line, "=all") {
			t.Errorf("lavender.service sets %q, which hides /proc/meminfo from lavender", line)
		}
	}
	for _, flag := range []string{" serve", "--runlog.dir=/var/lib/lavender/logs", "--watchdog.interval=0"} {
		if !strings.Contains(unit, flag) {
			t.Errorf("ExecStart lacks %q", flag)
		}
	}
}
