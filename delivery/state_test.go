package delivery

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDamagedStateMovedAside: a state file lavender did not write whole is
// moved aside under a numbered name, with a WARN; the bridge starts, and
// its next save writes a good file.
func TestDamagedStateMovedAside(t *testing.T) {
	good := func(mod func(*stateFile)) func(string) error {
		return func(path string) error {
			f := stateFile{Version: stateFileVersion, Storm: []stormSaved{{Target: "phone.bark.env:1", TargetID: "x",
				Held: []heldCount{{StormEvent{Alert: "A"}, 1}}}}, Dedup: []dedupSaved{{Target: "x", Incident: "f@1", Status: "firing", Expires: incidentStart.Add(time.Hour)}}}
			mod(&f)
			data, _ := json.Marshal(f)
			return os.WriteFile(path, data, 0o644)
		}
	}
	for name, make := range map[string]func(path string) error{
		"not JSON":           func(path string) error { return os.WriteFile(path, []byte(`{"version":1,"storm":[`), 0o644) },
		"another version":    good(func(f *stateFile) { f.Version = 2 }),
		"a count of zero":    good(func(f *stateFile) { f.Storm[0].Held[0].Count = 0 }),
		"alert and watchdog": good(func(f *stateFile) { f.Storm[0].Held[0].Watchdog = "swap" }),
		"alert and words":    good(func(f *stateFile) { f.Storm[0].Held[0].Words = "swap" }),
		"a bad dedup status": good(func(f *stateFile) { f.Dedup[0].Status = "maybe" }),
		"a FIFO":             func(path string) error { return syscall.Mkfifo(path, 0o644) },
		"/dev/zero":          func(path string) error { return os.Symlink("/dev/zero", path) },
		"over the limit": func(path string) error {
			if err := good(func(*stateFile) {})(path); err != nil {
				return err
			}
			return os.Truncate(path, maxStateFileBytes+1) // sparse: costs no disk
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newStateFixture(t)
			if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
				t.Fatal(err)
			}
			// Damaged twice in a row: both copies are kept.
			for round, aside := range []string{".damaged", ".damaged-2"} {
				os.Remove(f.path) // the good state the first round saved
				if err := make(f.path); err != nil {
					t.Fatal(err)
				}
				f.restart()
				if log := f.logs.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "damaged Bark state not restored") ||
					!strings.Contains(log, StateFileName+aside) {
					t.Errorf("round %d: no WARN naming %s:\n%s", round, aside, log)
				}
				if _, err := os.Lstat(f.path + aside); err != nil {
					t.Errorf("round %d: not moved aside: %v", round, err)
				}
				f.postAlerts(round, round+1)
				data, err := os.ReadFile(f.path)
				if err != nil {
					t.Fatalf("round %d: no state saved after a push: %v", round, err)
				}
				if _, err := decodeState(data); err != nil {
					t.Errorf("round %d: the saved state does not read back: %v\n%s", round, err, data)
				}
			}
		})
	}
}

// TestStateOfTheLastVersionIsRestored: a state file written by lavender
// 0.3 (an alert's fingerprint and start instead of its incident, a held
// watchdog alert by its rule's name) restores: the alert it pushed is a
// duplicate, and its held alert goes out in the summary.
func TestStateOfTheLastVersionIsRestored(t *testing.T) {
	f := newStateFixture(t)
	f.postAlerts(0, 1) // loads the target, so its identity is known
	data, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	var now stateFile
	if err := json.Unmarshal(data, &now); err != nil || len(now.Dedup) != 1 || len(now.Storm) != 1 {
		t.Fatalf("state %s: %v", data, err)
	}
	id := now.Dedup[0].Target
	old := fmt.Sprintf(`{"version":1,"storm":[{"target":"phone.bark.env:1","target_id":%q,"sent":[%q],"held":[{"watchdog":"stalled","count":2}]}],`+
		`"dedup":[{"target":%q,"fingerprint":"0000000000000002","starts_at":%d,"status":"firing","expires":%q}]}`,
		id, incidentStart.Format(time.RFC3339Nano), id, incidentStart.Add(time.Second).UnixNano(), incidentStart.Add(time.Hour).Format(time.RFC3339Nano))
	f.bridge.Close()
	if err := os.WriteFile(f.path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	f.restart()
	if log := f.logs.String(); !strings.Contains(log, "held=2 dedup=1") {
		t.Fatalf("the restart restored:\n%s", log)
	}
	if got := f.postAlerts(1, 2); got[0] != ActionDuplicate {
		t.Errorf("the alert the last version pushed: %s, want a duplicate", got[0])
	}
	f.clock.Set(incidentStart.Add(time.Minute))
	f.bridge.SendDue(t.Context(), f.clock.Now())
	got := f.srv.Pushes()
	if last := got[len(got)-1].Body; last != "[lavender-2] 2 more alerts held across a restart: watchdog stalled ×2" {
		t.Errorf("summary %q", last)
	}
}

// TestSaveWaitsOnlyForItsOwnChange: a caller whose change a save that ran
// meanwhile already wrote writes nothing, though something else changed
// since; that later change has its own save coming. So callers queued
// behind a save on the disk share the next one instead of each writing the
// file again.
func TestSaveWaitsOnlyForItsOwnChange(t *testing.T) {
	f := newStateFixture(t)
	f.postAlerts(0, 2) // one push, one held: the file exists
	b := f.bridge
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino // each save renames a new file into place
	}

	held := b.changed() // a held alert, its caller not yet at the save
	b.saveState()       // another caller's save writes it
	saved := inode()
	b.changed() // then something else changes, its save still to come
	b.saveStateThrough(held)
	if inode() != saved {
		t.Error("the file was written again for a change already saved")
	}
	b.saveState() // the later change's own save
	if inode() == saved {
		t.Error("the later change was not saved")
	}
}

// TestBatchSavesAtClose: a batch's parts save nothing; Close saves what
// they all held, once.
func TestBatchSavesAtClose(t *testing.T) {
	f := newStateFixture(t)
	f.postAlerts(0, 1) // the one push a minute; what follows is held
	heldInFile := func() int {
		t.Helper()
		data, err := os.ReadFile(f.path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		var st stateFile
		if len(data) > 0 {
			if err := json.Unmarshal(data, &st); err != nil {
				t.Fatal(err)
			}
		}
		n := 0
		for _, s := range st.Storm {
			for _, h := range s.Held {
				n += h.Count
			}
		}
		return n
	}
	before := heldInFile()
	batch := f.bridge.NewBatch()
	for i := 1; i <= 3; i++ {
		p := NewPush("SwapUsageHigh", "[lavender-2] SwapUsageHigh")
		p.Key = &Key{Incident: AlertIncident(fmt.Sprintf("%016x", i+1), incidentStart.UnixNano()), Status: "firing"}
		p.Storm = []StormEvent{AlertEvent("SwapUsageHigh", false)}
		batch.Send(t.Context(), []*Push{p})
		if p.Held != 1 {
			t.Fatalf("push %d: held %d, want 1", i, p.Held)
		}
	}
	if n := heldInFile(); n != before {
		t.Errorf("the state file holds %d alerts before Close, want %d as before the batch", n, before)
	}
	batch.Close()
	if n := heldInFile(); n != before+3 {
		t.Errorf("the state file holds %d alerts after Close, want %d", n, before+3)
	}
}

// restart takes an edit of the target files in with a restart after a
// crash: only the state file carries the held alerts over.
func restart(f *stateFixture) { f.restart() }

// TestSaveLeavesOutAlertsOfATargetGone: a Send that began before a reload
// may hold an alert under a target the reload removed. The save leaves it
// out (its summary has nowhere to go), rather than write an entry without
// a target that the next start would refuse, moving the whole file aside
// with every other held alert and the dedup memory.
func TestSaveLeavesOutAlertsOfATargetGone(t *testing.T) {
	f := newStateFixture(t)
	f.postAlerts(0, 2) // one push, one held: the file exists
	gone := []StormEvent{AlertEvent("DiskFull", false)}
	now := f.clock.Now()
	f.bridge.storm.Allow("gone.bark.env:1", gone, now) // the minute's one push
	if f.bridge.storm.Allow("gone.bark.env:1", gone, now) {
		t.Fatal("the second alert of the minute was not held")
	}
	f.bridge.changed()
	f.bridge.saveState()
	f.restart()
	logs := f.logs.String()
	if strings.Contains(logs, "moved aside") || !strings.Contains(logs, "held=1") || !strings.Contains(logs, "dedup=2") {
		t.Errorf("restart did not restore the phone's held alert and the dedup memory:\n%s", logs)
	}
}
