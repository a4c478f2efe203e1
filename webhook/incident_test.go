package webhook

import (
	"regexp"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/watchpush"
)

func TestIncidentIDStableAcrossCopies(t *testing.T) {
	startsAt := time.Date(2026, 11, 30, 13, 4, 5, 123456789, time.UTC)
	// The same instant as another HA peer, or a retry, might carry it.
	inBerlin := startsAt.In(time.FixedZone("CET", 3600))
	reparsed, err := time.Parse(time.RFC3339Nano, startsAt.Format(time.RFC3339Nano))
	if err != nil {
		t.Fatal(err)
	}
	firing := incidentID("3fa2b1c0d9e8f7a6", startsAt)
	for name, id := range map[string]string{
		"again":         incidentID("3fa2b1c0d9e8f7a6", startsAt),
		"other zone":    incidentID("3fa2b1c0d9e8f7a6", inBerlin),
		"JSON reparsed": incidentID("3fa2b1c0d9e8f7a6", reparsed),
	} {
		if id != firing {
			t.Errorf("%s: id %s, want %s", name, id, firing)
		}
	}
	w := watchpush.IncidentID("swap", startsAt, "gpu-7")
	if w != watchpush.IncidentID("swap", inBerlin, "gpu-7") {
		t.Error("watchdog id depends on the time zone")
	}
}

func TestIncidentIDDistinct(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	ids := map[string]string{
		"alert":                 incidentID("aaaa", t0),
		"other fingerprint":     incidentID("aaab", t0),
		"next incident":         incidentID("aaaa", t0.Add(time.Nanosecond)),
		"next incident later":   incidentID("aaaa", t0.Add(42*time.Minute)),
		"watchdog":              watchpush.IncidentID("swap", t0, "gpu-7"),
		"watchdog other rule":   watchpush.IncidentID("stall", t0, "gpu-7"),
		"watchdog other host":   watchpush.IncidentID("swap", t0, "gpu-8"),
		"watchdog later":        watchpush.IncidentID("swap", t0.Add(time.Second), "gpu-7"),
		"watchdog split differ": watchpush.IncidentID("swapg", t0, "pu-7"),
		"watchdog as alert":     incidentID("swap", t0),
	}
	seen := make(map[string]string)
	valid := regexp.MustCompile(`^[0-9a-f]{16}$`)
	for name, id := range ids {
		if !valid.MatchString(id) {
			t.Errorf("%s: id %q is not 16 hex digits", name, id)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share id %s", name, other, id)
		}
		seen[id] = name
	}
}

// Many incidents of one alert, a minute apart, never share an id.
func TestIncidentIDNoCollisionsInAYear(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := make(map[string]bool)
	for i := range 60 * 24 * 365 / 10 { // every 10 minutes for a year
		id := incidentID("3fa2b1c0d9e8f7a6", t0.Add(time.Duration(i)*10*time.Minute))
		if seen[id] {
			t.Fatalf("id %s repeated at incident %d", id, i)
		}
		seen[id] = true
	}
}
