package barkbridge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lavender/internal/barktest"
	"lavender/watchdog"
)

func TestStatusRecordsTargetsAndEvents(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY") + "\n" + barktest.DownURL(t) + "/SECRETKEY123/$0"}, nil)

	before := f.bridge.Status()
	if len(before.Targets) != 2 || before.Targets[0].Result != "" || len(before.Events) != 0 {
		t.Fatalf("before any push: %+v", before)
	}

	f.post(readTestdata(t, "firing_swap_54.json"))
	f.post(readTestdata(t, "below_threshold.json"))
	f.bridge.Push(t.Context(), []watchdog.Alert{swapAlert(0.6, 19*bytesPerGiB, 32*bytesPerGiB)})

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
	if first.Action != ActionPushed || first.Message != "[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening" ||
		len(first.Failures) != 1 || first.Failures[0] != "phone.bark.env:2 failed: connection refused" {
		t.Errorf("first event %+v", first)
	}

	html := string(f.bridge.StatusHTML())
	data, _ := json.Marshal(f.bridge.StatusJSON())
	for _, out := range []string{html, string(data)} {
		if strings.Contains(out, "SECRETKEY123") || strings.Contains(out, srv.URL) {
			t.Errorf("status shows a URL or key:\n%s", out)
		}
	}
	for _, want := range []string{"<code>phone.bark.env:1</code>", "✗ failed: connection refused", "sent ok=1 fail=1", "skipped"} {
		if !strings.Contains(html, want) {
			t.Errorf("section lacks %q", want)
		}
	}
}

func TestStatusEventsAreBoundedAndEscaped(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, nil)
	for range maxEvents + 5 {
		f.post([]byte(`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"<script>x</script>"},"annotations":{"summary":"<b>hi</b>"}}]}`))
	}
	s := f.bridge.Status()
	if len(s.Events) != maxEvents {
		t.Errorf("%d events kept, want %d", len(s.Events), maxEvents)
	}
	html := string(f.bridge.StatusHTML())
	if strings.Contains(html, "<script>") || strings.Contains(html, "<b>hi") || !strings.Contains(html, "&lt;script&gt;") {
		t.Errorf("alert text not escaped:\n%s", html)
	}
}

func TestStatusForgetsTargetsAReloadRemoved(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"a.bark.env": srv.Template("KEY"), "b.bark.env": srv.Template("KEY")}, nil)
	f.bridge.Push(t.Context(), []watchdog.Alert{swapAlert(0.6, 19*bytesPerGiB, 32*bytesPerGiB)})
	if n := len(f.bridge.history.results); n != 2 {
		t.Fatalf("%d results after a push to two targets", n)
	}
	if err := os.Remove(filepath.Join(f.dir, "b.bark.env")); err != nil {
		t.Fatal(err)
	}
	if err := f.bridge.Reload(); err != nil {
		t.Fatal(err)
	}
	s := f.bridge.Status()
	if len(f.bridge.history.results) != 1 || len(s.Targets) != 1 || s.Targets[0].Target != "a.bark.env:1" || s.Targets[0].Result != "ok" {
		t.Errorf("after the reload: results %v, status %+v", f.bridge.history.results, s.Targets)
	}
}
