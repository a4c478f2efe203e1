package delivery

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lavender-ml/lavender/internal/barktest"
)

func TestStatusForgetsTargetsAReloadRemoved(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"a.bark.env": srv.Template("KEY"), "b.bark.env": srv.Template("KEY")}, nil)
	f.send("swap 60%", "[lavender-2] swap 60% full")
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
