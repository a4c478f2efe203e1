package delivery

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestReloadOvertaken: a reload that read the files before an edit, and
// is slow to store them, must not overwrite a reload that read the edit.
// The first reload is parked between its read and its store; the second,
// started after the edit, must wait for it (with the lock it blocks, so
// the short wait below passes without it finishing; without the lock it
// finishes first, and the parked reload then stores the older targets).
func TestReloadOvertaken(t *testing.T) {
	f := newFixture(t, map[string]string{"phone.bark.env": "https://api.day.app/KEY0000001/$0\n"}, nil)
	parked, release := make(chan struct{}), make(chan struct{})
	var calls sync.Mutex
	first := true
	f.bridge.afterRead = func() {
		calls.Lock()
		isFirst := first
		first = false
		calls.Unlock()
		if isFirst {
			close(parked)
			<-release
		}
	}
	older := make(chan error, 1)
	go func() { older <- f.bridge.Reload() }()
	<-parked
	barktest.AddTargets(t, f.dir, map[string]string{"phone.bark.env": "https://api.day.app/KEY0000001/$0\nhttps://api.day.app/KEY0000002/$0\n"})
	newer := make(chan error, 1)
	go func() { newer <- f.bridge.Reload() }()
	select {
	case err := <-newer: // only without serialisation
		newer <- err
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-older; err != nil {
		t.Fatal(err)
	}
	if err := <-newer; err != nil {
		t.Fatal(err)
	}
	if got := len(f.bridge.Targets()); got != 2 {
		t.Errorf("%d targets after both reloads, the file has 2: the older read won", got)
	}
	if v := f.metrics().MustValue(t, "lavender_bark_targets", nil); v != 2 {
		t.Errorf("lavender_bark_targets = %v, want 2", v)
	}
	if !hasSeries(t, f, "lavender_bark_pushes_total", "phone.bark.env:2") {
		t.Error("the series of phone.bark.env:2 is gone")
	}
}

// TestReloadsAreSerialised: reloads racing with edits of the config (a
// SIGHUP and a POST /-/reload at once) end with the targets, the
// lavender_bark_targets gauge and the per-target series of the file as it
// was last written, never of an older read. Without the load lock, a
// reload that read the file early can store its targets after one that
// read it late.
func TestReloadsAreSerialised(t *testing.T) {
	f := newFixture(t, map[string]string{"phone.bark.env": "https://api.day.app/KEY0000001/$0\n"}, nil)
	const rounds = 40
	for round := range 3 {
		var wg sync.WaitGroup
		lines := 0
		for i := range rounds {
			lines = 1 + (i+round)%5
			var content strings.Builder
			for l := range lines {
				content.WriteString("https://api.day.app/KEY" + strings.Repeat("x", l+1) + "0000001/$0\n")
			}
			// Atomically, as an editor saves: a reload reads one version.
			tmp := filepath.Join(f.dir, "phone.tmp")
			if err := os.WriteFile(tmp, []byte(content.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(f.dir, "phone.bark.env")); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				if err := f.bridge.Reload(); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := len(f.bridge.Targets()); got != lines {
			t.Fatalf("round %d: %d targets in use, the file has %d", round, got, lines)
		}
		if v := f.metrics().MustValue(t, "lavender_bark_targets", nil); v != float64(lines) {
			t.Fatalf("round %d: lavender_bark_targets = %v, the file has %d", round, v, lines)
		}
		for l := 1; l <= 5; l++ {
			name := "phone.bark.env:" + strconv.Itoa(l)
			has := hasSeries(t, f, "lavender_bark_pushes_total", name)
			if has != (l <= lines) {
				t.Fatalf("round %d: series of %s present=%v with %d lines", round, name, has, lines)
			}
		}
	}
}

// hasSeries says whether the bridge exports target's series of metric,
// which has a target and a result label (both results exist from the load).
func hasSeries(t *testing.T, f *fixture, metric, target string) bool {
	t.Helper()
	_, err := f.metrics().Value(metric, testkit.Labels{"target": target, "result": "ok"})
	return err == nil
}

// reload takes an edit of the target files in with a reload.
func reload(f *stateFixture) {
	f.t.Helper()
	if err := f.bridge.Reload(); err != nil {
		f.t.Fatal(err)
	}
}
