package watchpush

import (
	"testing"

	"github.com/lavender-ml/lavender/watchdog"
)

// TestDiskLevelCoversDiskSpace: the event disk sets the level of the
// kernel's storage faults and of the disk guard's pushes, unless
// disk-space is given on its own; a resolution stays passive.
func TestDiskLevelCoversDiskSpace(t *testing.T) {
	space := []watchdog.Alert{{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing}}
	fault := []watchdog.Alert{{Rule: watchdog.RuleDisk, Status: watchdog.Firing}}
	for _, tt := range []struct {
		flag         string
		space, fault string
	}{
		{"", "passive", "passive"},
		{"disk=timeSensitive", "timeSensitive", "timeSensitive"},
		{"disk=critical,disk-space=active", "active", "critical"},
		{"disk-space=active", "active", "passive"},
	} {
		l, err := ParseLevels([]string{tt.flag})
		if err != nil {
			t.Fatal(err)
		}
		if got := l.of(space); got != tt.space {
			t.Errorf("%q: disk-space push %s, want %s", tt.flag, got, tt.space)
		}
		if got := l.of(fault); got != tt.fault {
			t.Errorf("%q: disk fault push %s, want %s", tt.flag, got, tt.fault)
		}
		resolved := []watchdog.Alert{{Rule: watchdog.RuleDiskSpace, Status: watchdog.Resolved}}
		if got := l.of(resolved); got != "passive" {
			t.Errorf("%q: resolution %s", tt.flag, got)
		}
	}
}

// TestGPULevelCoversTheTelemetryRules: the event gpu sets the level of the
// kernel log's Xids and of every GPU telemetry rule, unless one is given
// on its own.
func TestGPULevelCoversTheTelemetryRules(t *testing.T) {
	for _, tt := range []struct {
		flag           string
		xid, lost, ecc string
	}{
		{"", "passive", "passive", "passive"},
		{"gpu=critical", "critical", "critical", "critical"},
		{"gpu=critical,gpu-ecc=active", "critical", "critical", "active"},
		{"gpu-lost=timeSensitive", "passive", "timeSensitive", "passive"},
	} {
		l, err := ParseLevels([]string{tt.flag})
		if err != nil {
			t.Fatal(err)
		}
		for rule, want := range map[watchdog.RuleName]string{watchdog.RuleGPU: tt.xid, watchdog.RuleGPULost: tt.lost, watchdog.RuleGPUECC: tt.ecc} {
			if got := l.of([]watchdog.Alert{{Rule: rule, Status: watchdog.Firing}}); got != want {
				t.Errorf("%q: %s push %s, want %s", tt.flag, rule, got, want)
			}
		}
	}
}
