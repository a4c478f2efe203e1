package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/exporter"
	"github.com/lavender-ml/lavender/heartbeat"
	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/runlog"
	"github.com/lavender-ml/lavender/watchdog"
	"github.com/lavender-ml/lavender/webguard"
	"github.com/lavender-ml/lavender/webhook"
)

// TestFlagDefaultsAreThePackagesConstants: a flag left unset gets the
// default of the package that owns the value, so the two can never drift
// apart (a literal in a flag's tag fails here once the constant changes).
func TestFlagDefaultsAreThePackagesConstants(t *testing.T) {
	serve := parseCLI(t, "serve").Serve
	run := parseCLI(t, "phase", "run", "X", "--", "true").Phase.Run
	for _, tc := range []struct {
		flag      string
		got, want any
	}{
		{"--runlog.dir", abs(t, serve.Dir), abs(t, runlog.DefaultDir)}, // a path flag: kong may make it absolute
		{"--runlog.max-bytes", serve.MaxBytes, runlog.DefaultMaxBytes},
		{"--bark.config-dir", abs(t, serve.BarkConfigDir), abs(t, delivery.DefaultConfigDir)},
		{"--bark.timeout", serve.BarkTimeout, delivery.DefaultTimeout},
		{"--bark.prefix", serve.BarkPrefix, pushtext.DefaultPrefix},
		{"--bark.threshold", serve.BarkThreshold, webhook.DefaultThreshold},
		{"--bark.swap-alertname", serve.BarkSwapAlertname, webhook.DefaultSwapAlertname},
		{"--bark.dedup-window", serve.BarkDedupWindow, delivery.DefaultDedupWindow},
		{"--webhook.max-bytes", serve.WebhookMaxBytes, int64(webhook.DefaultMaxBodyBytes)},
		{"--path.procfs", serve.ProcFS, exporter.DefaultProcFS},
		{"--status.history-step", serve.HistoryStep, watchdog.DefaultStep},
		{"--watchdog.interval", serve.WatchdogInterval, watchdog.DefaultInterval},
		{"--watchdog.threshold", serve.WatchdogThreshold, watchdog.DefaultThreshold},
		{"--watchdog.pressure-threshold", serve.WatchdogPressureThreshold, watchdog.DefaultPressureThreshold},
		{"--watchdog.repeat", serve.WatchdogRepeat, watchdog.DefaultRepeat},
		{"--watchdog.hysteresis", serve.WatchdogHysteresis, watchdog.DefaultHysteresis},
		{"--path.kmsg", serve.KmsgPath, kmsg.DefaultPath},
		{"--web.listen-address", fmt.Sprint(serve.ListenAddresses), fmt.Sprint([]string{":" + phaseapi.DefaultPort})},
		{"--url", run.URL, heartbeat.DefaultURL},
		{"--timeout", run.Timeout, heartbeat.DefaultTimeout},
		{"--every", run.Every, heartbeat.DefaultPingInterval},
	} {
		if tc.got != tc.want {
			t.Errorf("%s defaults to %v, want the package's %v", tc.flag, tc.got, tc.want)
		}
	}
	if !slices.Equal(serve.WriteAllow, webguard.DefaultWriteAllow) {
		t.Errorf("--web.write-allow defaults to %v, want webguard's %v", serve.WriteAllow, webguard.DefaultWriteAllow)
	}
}

func abs(t *testing.T, path string) string {
	t.Helper()
	a, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
