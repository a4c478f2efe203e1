package delivery

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// setStateWaits shortens (or lengthens) the least time between two tries
// to save the state and the cap of the wait between tries of a failed
// save, as a test needs; call it before the bridge saves anything.
func setStateWaits(b *Pipeline, every, retryMax time.Duration) {
	b.state.every, b.state.retryMax = every, retryMax
}

// fullStateFixture is a state fixture whose state file is on a 64 KiB
// tmpfs, filled; its write errors are counted in writeErrors. It skips the
// test, saying why, where a tmpfs cannot be mounted.
type fullStateFixture struct {
	*stateFixture
	writeErrors prometheus.Counter
	filler      string // the file that fills the tmpfs; removing it frees the space
}

func newFullStateFixture(t *testing.T, maxPerMinute int, every, retryMax time.Duration) *fullStateFixture {
	t.Helper()
	logs := testkit.MountTmpfs(t, "size=64k")
	srv := barktest.New(t)
	clock := newTestClock()
	path := filepath.Join(logs, StateFileName)
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "state_write_errors_total"})
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *Config) {
		c.Now, c.MaxPerMinute, c.StateFile, c.Prefix = clock.Now, maxPerMinute, path, "[lavender-2]"
		c.WriteErrors = counter
	})
	sf := &stateFixture{fixture: f, srv: srv, clock: clock, path: path}
	t.Cleanup(func() { sf.bridge.Close() })
	setStateWaits(f.bridge, every, retryMax)
	return &fullStateFixture{stateFixture: sf, writeErrors: counter, filler: fillDisk(t, logs)}
}

// fillDisk fills the filesystem of dir with one file, and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := fh.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return path
		}
	}
}

// failedSaves is the number of tries to save the state that failed.
func (f *fullStateFixture) failedSaves() int { return int(testutil.ToFloat64(f.writeErrors)) }

// stateOnDisk reads the state file: the alerts it holds and its dedup
// entries; -1, -1 while there is none.
func stateOnDisk(t *testing.T, path string) (held, dedup int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return -1, -1
	}
	if err != nil {
		t.Fatal(err)
	}
	var st stateFile
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("the state file does not parse: %v", err)
	}
	for _, s := range st.Storm {
		held += s.Others
		for _, h := range s.Held {
			held += h.Count
		}
	}
	return held, len(st.Dedup)
}

// TestHeldAlertsSavedOnceSpaceIsBack: alerts storm control held (answered
// 200) while the logs dir was full reach the state file once space is
// back, with nothing else happening: the failed save is tried again by a
// timer. A crash after that keeps them. Before, nothing tried again until
// the next change, and a crash meanwhile lost them.
func TestHeldAlertsSavedOnceSpaceIsBack(t *testing.T) {
	f := newFullStateFixture(t, 1, 20*time.Millisecond, 100*time.Millisecond)
	if got := f.postAlerts(0, 3); strings.Join(got, ",") != "pushed,held,held" {
		t.Fatalf("actions %v, want pushed,held,held", got)
	}
	if f.failedSaves() == 0 {
		t.Fatal("no save failed on the full disk")
	}
	if held, _ := stateOnDisk(t, f.path); held > 0 {
		t.Fatalf("the full disk took a state file holding %d alerts", held)
	}

	if err := os.Remove(f.filler); err != nil { // the user deletes a checkpoint
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		held, _ := stateOnDisk(t, f.path)
		return held == 2
	}, "the 2 held alerts in the state file once space is back, with no other event")

	f.restart() // lavender dies (OOM killer, kill -9) and starts again
	if log := f.logs.String(); !strings.Contains(log, "held=2") {
		t.Errorf("the restart did not restore the 2 held alerts:\n%s", log)
	}
	f.clock.Advance(time.Minute)
	f.bridge.SendDue(t.Context(), f.clock.Now())
	got := f.srv.Accepted()
	if len(got) != 2 || !strings.HasPrefix(got[1].Body, "[lavender-2] 2 more alerts held across a restart") {
		t.Errorf("%d pushes, the last %+v; want the first alert's and the summary of the 2 held", len(got), got[len(got)-1])
	}
}

// TestFailedSaveTriedAgainUntilClose: while the disk stays full, the save
// is tried again, after doubling waits, each try counted as a write error;
// Close stops the tries.
func TestFailedSaveTriedAgainUntilClose(t *testing.T) {
	f := newFullStateFixture(t, 1, 5*time.Millisecond, 20*time.Millisecond)
	f.postAlerts(0, 2) // one pushed, one held: a save is due
	testkit.WaitFor(t, 20*time.Second, func() bool { return f.failedSaves() >= 4 },
		"the failed save tried again, and again")
	f.bridge.Close()
	tries := f.failedSaves()
	time.Sleep(200 * time.Millisecond)     // ten times the longest wait between tries
	if n := f.failedSaves(); n > tries+1 { // one may have been under way at Close
		t.Errorf("%d tries to save after Close", n-tries)
	}
}

// TestSavesWhileTheDiskIsFullAreBounded: on a full disk, pushes in quick
// succession share one try to save (the first), where each paid a full
// save of the state (a 2 MB marshal with a full dedup memory) and counted a
// write error; so do held alerts, which try at once only when the last
// try did not fail within the interval. Once space is back, Flush's save
// at a stop tries at once, however recent the last failure.
func TestSavesWhileTheDiskIsFullAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name         string
		maxPerMinute int
		wantHeld     int
	}{
		{"pushes", 0, 0},
		{"held alerts", 1, 0}, // Flush sends their summary before its save
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An interval no test run reaches: every try but the first
			// would be a push's own.
			f := newFullStateFixture(t, tc.maxPerMinute, time.Hour, time.Hour)
			const n = 50
			held := 0
			for i := range n {
				p := NewPush("swap", "swap")
				p.Key = &Key{Incident: fmt.Sprintf("k%d", i), Status: "firing"}
				p.Storm = []StormEvent{WordedEvent("swap", false)}
				f.bridge.Send(t.Context(), []*Push{p})
				if p.OK+p.Held != 1 {
					t.Fatalf("push %d: %+v", i, p.Outcome)
				}
				held += p.Held
			}
			if tc.maxPerMinute > 0 && held != n-1 {
				t.Fatalf("%d held, want %d", held, n-1)
			}
			if got := f.failedSaves(); got != 1 {
				t.Errorf("%d pushes tried to save %d times on the full disk, want once", n, got)
			}

			if err := os.Remove(f.filler); err != nil {
				t.Fatal(err)
			}
			f.bridge.Flush(t.Context())
			if got := f.failedSaves(); got != 1 {
				t.Errorf("failed saves %d after space came back, want 1", got)
			}
			inFile, dedup := stateOnDisk(t, f.path)
			if inFile != tc.wantHeld || dedup < n-held {
				t.Errorf("after Flush the state file holds %d alerts and %d dedup entries, want %d and at least %d",
					inFile, dedup, tc.wantHeld, n-held)
			}
		})
	}
}
