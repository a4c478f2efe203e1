package webhook

import (
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
)

// TestResolvedCarriesNoFiringFigures: Prometheus resolves an alert with the
// annotations of its last firing evaluation, so a resolution read off them
// would show figures from before the condition ended as the ones of now.
// Each alert whose annotations carry figures is resolved with the figures
// it fired with; the push says only what the resolution means.
func TestResolvedCarriesNoFiringFigures(t *testing.T) {
	swap := template.KV{"swap_used_ratio": "0.54", "swap_used_bytes": "18554258719", "swap_total_bytes": "34359738368"}
	withThreshold := func(kv template.KV, threshold string) template.KV {
		out := template.KV{"swap_threshold_ratio": threshold}
		for k, v := range kv {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		alertname   string
		labels      template.KV
		annotations template.KV
		want        string
	}{
		{"SwapUsageHigh", nil, withThreshold(swap, "0.5"), "[lavender-2] resolved: swap back under 50% after 42m"},
		{"SwapUsageHigh", nil, withThreshold(swap, "0.575"), "[lavender-2] resolved: swap back under 58% after 42m"},
		{"SwapUsageHigh", nil, swap, "[lavender-2] resolved: swap back under its threshold after 42m"},
		{"SwapUsageHigh", nil, withThreshold(swap, "0x1p-1"), "[lavender-2] resolved: swap back under its threshold after 42m"},
		{"SwapUsageHigh", nil, nil, "[lavender-2] resolved: swap back under its threshold after 42m"},
		{PressureAlertname, nil, template.KV{"pressure_ratio": "0.2300", "pressure_window_seconds": "60", "swap_used_bytes": "18554258719", "swap_total_bytes": "34359738368"},
			"[lavender-2] resolved: MemoryPressureHigh after 42m"},
		{DiskSaveAlertname, template.KV{labelPath: "/data"}, template.KV{"avail_bytes": "16777216", "save_bytes": "25165824"}, "[lavender-2] resolved: DiskSaveWillNotFit after 42m"},
		{DiskSpaceAlertname, template.KV{labelPath: "/data"}, template.KV{"avail_bytes": "1", "size_bytes": "100"}, "[lavender-2] resolved: DiskSpaceLow after 42m"},
		{DiskInodesAlertname, template.KV{labelPath: "/data"}, template.KV{"files_free": "10", "files": "1000"}, "[lavender-2] resolved: DiskInodesLow after 42m"},
		{DiskUnreadableAlertname, template.KV{labelPath: "/mnt/nfs"}, nil, "[lavender-2] resolved: DiskUnreadable after 42m"},
		{PhaseStalledAlertname, template.KV{"phase": "Pretrain 1/3"}, template.KV{"phase": "Pretrain 1/3", "stalled_seconds": "600"}, "[lavender-2] resolved: PhaseStalled after 42m"},
		{PhaseProgressStalledAlertname, template.KV{"phase": "Pretrain 1/3"}, template.KV{"phase": "Pretrain 1/3", "stalled_seconds": "600", "step": "1200", "total_steps": "5000"},
			"[lavender-2] resolved: PhaseProgressStalled after 42m"},
	}
	f := newFixture(t, nil, func(c *fixtureConfig) { c.SendResolved = true })
	for _, tt := range tests {
		labels := template.KV{"alertname": tt.alertname, "instance": "gpu-box:9877"}
		for k, v := range tt.labels {
			labels[k] = v
		}
		a := template.Alert{Status: "resolved", Labels: labels, Annotations: tt.annotations,
			StartsAt: incidentStart, EndsAt: incidentStart.Add(42 * time.Minute)}
		got := "nothing"
		if d := f.hook.planAlert(a); d != nil {
			got = d.Text
		}
		if got != tt.want {
			t.Errorf("%s resolved with %v: pushed %q, want %q", tt.alertname, tt.annotations, got, tt.want)
		}
	}
}
