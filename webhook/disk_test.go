package webhook

import (
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
)

// TestDiskTextFallsBackOnFiguresThatMakeNoSense: a disk alert whose
// figures are missing, not counts, or contradict each other is not worded
// as the watchdog's push (the bridge pushes the summary instead); the same
// alert with sound figures is.
func TestDiskTextFallsBackOnFiguresThatMakeNoSense(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, alertname string
		annotations     template.KV
		startsAt        time.Time
		worded          bool
	}{
		{"space", DiskSpaceAlertname, template.KV{"avail_bytes": "1", "size_bytes": "100"}, time.Time{}, true},
		{"space, all free", DiskSpaceAlertname, template.KV{"avail_bytes": "100", "size_bytes": "100"}, time.Time{}, true},
		{"space, more free than the size", DiskSpaceAlertname, template.KV{"avail_bytes": "101", "size_bytes": "100"}, time.Time{}, false},
		{"space, size 0", DiskSpaceAlertname, template.KV{"avail_bytes": "0", "size_bytes": "0"}, time.Time{}, false},
		{"space, no size", DiskSpaceAlertname, template.KV{"avail_bytes": "1"}, time.Time{}, false},
		{"space, hex size", DiskSpaceAlertname, template.KV{"avail_bytes": "1", "size_bytes": "0x100"}, time.Time{}, false},
		{"inodes", DiskInodesAlertname, template.KV{"files_free": "10", "files": "1000"}, time.Time{}, true},
		{"inodes, more free than there are", DiskInodesAlertname, template.KV{"files_free": "1001", "files": "1000"}, time.Time{}, false},
		{"inodes, none at all", DiskInodesAlertname, template.KV{"files_free": "0", "files": "0"}, time.Time{}, false},
		{"inodes, negative free", DiskInodesAlertname, template.KV{"files_free": "-1", "files": "1000"}, time.Time{}, false},
		{"save", DiskSaveAlertname, template.KV{"avail_bytes": "200", "save_bytes": "100"}, time.Time{}, true},
		{"save of 0 bytes", DiskSaveAlertname, template.KV{"avail_bytes": "200", "save_bytes": "0"}, time.Time{}, false},
		{"unreadable", DiskUnreadableAlertname, nil, now.Add(-2 * time.Minute), true},
		{"unreadable, no start", DiskUnreadableAlertname, nil, time.Time{}, false},
		{"unreadable, starts later", DiskUnreadableAlertname, nil, now.Add(time.Minute), false},
		{"another alert", "SwapUsageHigh", template.KV{"avail_bytes": "1", "size_bytes": "100"}, time.Time{}, false},
	}
	for _, tt := range tests {
		a := template.Alert{Labels: template.KV{labelPath: "/data"}, Annotations: tt.annotations, StartsAt: tt.startsAt}
		if _, ok := diskText(tt.alertname, a, now); ok != tt.worded {
			t.Errorf("%s: worded %v, want %v", tt.name, ok, tt.worded)
		}
	}
	a := template.Alert{Labels: template.KV{labelPath: "data"}, Annotations: template.KV{"avail_bytes": "1", "size_bytes": "100"}}
	if _, ok := diskText(DiskSpaceAlertname, a, now); ok {
		t.Error("a relative path label was worded as a disk push")
	}
}

// TestDiskUnreadableCountsTheRulesFor: Prometheus fires DiskUnreadable
// (and sets its startsAt) only once statfs has failed for the rule's `for`,
// and Alertmanager's group_wait passes before the push: the push says the
// path has been unreadable for over the time since startsAt and that `for`,
// never the time since startsAt alone.
func TestDiskUnreadableCountsTheRulesFor(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		sinceStart time.Duration
		want       string
	}{
		{0, "disk /mnt/nfs: unreadable for over 1m (statfs failed or did not answer) — a save there may fail"},
		{30 * time.Second, "disk /mnt/nfs: unreadable for over 1m (statfs failed or did not answer) — a save there may fail"},
		{2 * time.Minute, "disk /mnt/nfs: unreadable for over 3m (statfs failed or did not answer) — a save there may fail"},
		{2 * time.Hour, "disk /mnt/nfs: unreadable for over 2h1m (statfs failed or did not answer) — a save there may fail"},
	} {
		a := template.Alert{Status: "firing", StartsAt: now.Add(-tt.sinceStart), Labels: template.KV{"alertname": DiskUnreadableAlertname, labelPath: "/mnt/nfs"}}
		got, ok := diskText(DiskUnreadableAlertname, a, now)
		if !ok || got.Body != tt.want || got.Subject != "disk unreadable /mnt/nfs" {
			t.Errorf("started %s ago: %q / %q (worded %v), want %q", tt.sinceStart, got.Body, got.Subject, ok, tt.want)
		}
	}
}
