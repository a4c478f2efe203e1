package webhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/watchdog"
)

func TestReloadKeepsTargetsOnError(t *testing.T) {
	srv := barktest.New(t, "K1")
	f := newFixture(t, map[string]string{"a.bark.env": srv.Template("K1")}, nil)
	if n := len(f.bridge.Targets()); n != 1 {
		t.Fatalf("targets = %d", n)
	}
	barktest.AddTargets(t, f.dir, map[string]string{"b.bark.env": "https://api.day.app/SECRETKEY123/"})
	err := f.bridge.Reload()
	if err == nil || !strings.Contains(err.Error(), "b.bark.env:1") || strings.Contains(err.Error(), "SECRETKEY123") {
		t.Fatalf("Reload error = %v", err)
	}
	if n := len(f.bridge.Targets()); n != 1 {
		t.Errorf("a failed reload changed the targets: %d", n)
	}
	if v := f.metrics().MustValue(t, "lavender_bark_config_last_reload_successful", nil); v != 0 {
		t.Errorf("last_reload_successful = %v", v)
	}

	// The reload endpoint reports the same, then succeeds once fixed.
	code, body := f.do("POST", "/-/reload")
	if code != 500 || !strings.Contains(body, "b.bark.env:1") || strings.Contains(body, "SECRETKEY123") {
		t.Errorf("POST /-/reload = %d %q", code, body)
	}
	barktest.AddTargets(t, f.dir, map[string]string{"b.bark.env": srv.Template("K1") + "\n" + srv.Template("K1")})
	code, body = f.do("POST", "/-/reload")
	if code != 200 || body != "loaded 3 Bark targets\n" {
		t.Errorf("POST /-/reload = %d %q", code, body)
	}
	if v := f.metrics().MustValue(t, "lavender_bark_targets", nil); v != 3 {
		t.Errorf("lavender_bark_targets = %v", v)
	}
	barktest.AddTargets(t, f.dir, map[string]string{"b.bark.env": "# phone gone"})
	if code, body := f.do("POST", "/-/reload"); code != 200 || body != "loaded 1 Bark target\n" {
		t.Errorf("POST /-/reload with one target = %d %q", code, body)
	}
	if code, _ := f.do("GET", "/-/reload"); code != 405 {
		t.Errorf("GET /-/reload = %d", code)
	}

	// Removing a file drops its targets and their series.
	os.Remove(filepath.Join(f.dir, "b.bark.env"))
	if err := f.bridge.Reload(); err != nil {
		t.Fatal(err)
	}
	if v := f.metrics().MustValue(t, "lavender_bark_targets", nil); v != 1 {
		t.Errorf("lavender_bark_targets = %v", v)
	}
	if n := len(f.metrics().Series("lavender_bark_pushes_total")); n != 2 {
		t.Errorf("pushes_total has %d series, want 2 (a.bark.env:1 ok|failed)", n)
	}
}

func TestNoTargetsWarnsLoudly(t *testing.T) {
	f := newFixture(t, nil, nil)
	if !strings.Contains(f.logs.String(), "NO TARGETS") {
		t.Errorf("no warning in:\n%s", f.logs)
	}
	if v := f.metrics().MustValue(t, "lavender_bark_targets", nil); v != 0 {
		t.Errorf("lavender_bark_targets = %v", v)
	}
	code, body := f.post(readTestdata(t, "firing_swap_54.json"))
	if code != 200 || !strings.Contains(body, delivery.ErrNoTargets.Error()) || !strings.Contains(body, "pushed=0 failed=1 skipped=0") {
		t.Errorf("webhook = %d %q", code, body)
	}
	if ok, failed := f.pusher.Push(t.Context(), []watchdog.Alert{swapAlert(0.6, 0, 0)}); ok != 0 || failed != 0 {
		t.Errorf("Push = %d, %d", ok, failed)
	}
	if lines := f.barkLines(); len(lines) != 0 {
		t.Errorf("run log lines without a push attempt: %q", lines)
	}
}
