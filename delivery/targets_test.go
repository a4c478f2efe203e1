package delivery

import (
	"testing"

	"github.com/prometheus/common/version"

	"github.com/lavender-ml/lavender/internal/barktest"
)

// TestPushesSayLavendersVersion: every push names lavender and its
// version as its User-Agent, as Prometheus' tools do ("lavender/0.3.0").
func TestPushesSayLavendersVersion(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, nil)
	f.send("swap 54%", "[lavender-2] swap 54% full")
	got := srv.Pushes()
	if want := "lavender/" + version.Version; len(got) != 1 || got[0].Header.Get("User-Agent") != want {
		t.Errorf("pushes %+v, want one with User-Agent %q", got, want)
	}
}
