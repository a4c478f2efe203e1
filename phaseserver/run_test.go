package phaseserver

import (
	"path/filepath"
	"testing"

	"github.com/lavender-ml/lavender/runlog"
)

// AppendToRun writes to the server's own run, even when another process
// has started a newer one in the same directory since.
func TestAppendToRunStaysOnItsRun(t *testing.T) {
	env := newTestEnv(t)
	if err := env.e.AppendToRun("RUN stop"); err == nil {
		t.Error("AppendToRun before any run: want an error")
	}
	own, err := env.e.StartRun("device=cpu", "RUN start  device=cpu")
	if err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(2e9) // a newer run, in another second
	other, err := runlog.Start(runlog.Options{Dir: env.dir, Now: env.clock.Now}, "", runlog.RunStart)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.e.AppendToRun("RUN stop"); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{own: 1, other.Path(): 0} {
		l, err := runlog.Open(runlog.Options{}, path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := l.Read()
		f, err := runlog.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, e := range f.AllEntries() {
			if e[9:] == "RUN stop" {
				got++
			}
		}
		if got != want {
			t.Errorf("%s has %d RUN stop lines, want %d:\n%s", filepath.Base(path), got, want, data)
		}
	}
}
