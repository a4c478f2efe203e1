package phaseserver

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// TestRunLogDoesNotWaitOnThePhaseLock: the status page reads the run log
// while a heartbeat holds the phase table's lock (its log line or table
// save stuck on a slow disk), and is not held up by it.
func TestRunLogDoesNotWaitOnThePhaseLock(t *testing.T) {
	env := newTestEnv(t)
	if env.e.RunLog() != nil {
		t.Fatal("a run log before the first run")
	}
	env.beat("SFT", phaseapi.EventStart, "")

	env.e.mu.Lock() // a heartbeat in the middle of its fsync
	read := make(chan string, 1)
	go func() {
		data, err := env.e.RunLog().Read()
		if err != nil {
			t.Error(err)
		}
		read <- string(data)
	}()
	select {
	case log := <-read:
		if !strings.Contains(log, " START SFT\n") {
			t.Errorf("run log %q lacks the phase", log)
		}
	case <-time.After(20 * time.Second): // a bound on a hang, not a speed target
		t.Error("reading the run log waited on the phase table's lock")
	}
	env.e.mu.Unlock()

	// A new run is published with its table.
	path, err := env.e.StartRun("", "")
	if err != nil {
		t.Fatal(err)
	}
	run, _ := env.e.Snapshot()
	if got := env.e.RunLog().Path(); got != path || filepath.Base(got) != run.File {
		t.Errorf("RunLog is %s, want the new run %s (table's run %s)", got, path, run.File)
	}
}
