package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/watchdog"
)

func TestStatusRecordsTargetsAndEvents(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY") + "\n" + barktest.DownURL(t) + "/SECRETKEY123/$0"},
		func(c *fixtureConfig) { c.Threshold = 0.5 })

	before := f.bridge.Status()
	if len(before.Targets) != 2 || before.Targets[0].Result != "" || len(before.Events) != 0 {
		t.Fatalf("before any push: %+v", before)
	}

	f.post(readTestdata(t, "firing_swap_54.json"))
	f.post(readTestdata(t, "below_threshold.json"))
	f.pusher.Push(t.Context(), []watchdog.Alert{swapAlert(0.6, 19*bytesPerGiB, 32*bytesPerGiB)})

	s := f.bridge.Status()
	if got := []string{s.Targets[0].Target + " " + s.Targets[0].Result, s.Targets[1].Target + " " + s.Targets[1].Result}; got[0] != "phone.bark.env:1 ok" || got[1] != "phone.bark.env:2 failed: connection refused" {
		t.Errorf("targets %q", got)
	}
	if len(s.Events) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(s.Events), s.Events)
	}
	newest, skipped, first := s.Events[0], s.Events[1], s.Events[2]
	if newest.Source != "watchdog" || newest.Subject != "swap 60%" || newest.OK != 1 || newest.Failed != 1 {
		t.Errorf("newest event %+v", newest)
	}
	if skipped.Action != ActionSkipped || skipped.Subject != "SwapUsageHigh" {
		t.Errorf("skipped event %+v", skipped)
	}
	if first.Action != delivery.ActionPushed || first.Message != "[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening" ||
		len(first.Failures) != 1 || first.Failures[0] != "phone.bark.env:2 failed: connection refused" {
		t.Errorf("first event %+v", first)
	}

	// The status page renders and serves this data: it must name targets
	// by file:line only, never by URL or key.
	data, err := json.Marshal(f.bridge.Status())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "SECRETKEY123") || strings.Contains(string(data), srv.URL) {
		t.Errorf("status shows a URL or key:\n%s", data)
	}
	for _, want := range []string{`"target":"phone.bark.env:1"`, `"result":"failed: connection refused"`, `"action":"skipped"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("status lacks %s:\n%s", want, data)
		}
	}
}

// The events are kept as they came, bounded; the status page escapes them
// (statuspage's TestPageEscapes).
func TestStatusEventsAreBounded(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, nil)
	for range delivery.MaxEvents + 5 {
		f.post([]byte(`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"<script>x</script>"},"annotations":{"summary":"<b>hi</b>"}}]}`))
	}
	s := f.bridge.Status()
	if len(s.Events) != delivery.MaxEvents {
		t.Errorf("%d events kept, want %d", len(s.Events), delivery.MaxEvents)
	}
	if s.Events[0].Subject != "<script>x</script>" {
		t.Errorf("subject %q: the data must be kept as it came, for the page to escape", s.Events[0].Subject)
	}
}
