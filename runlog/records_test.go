package runlog

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// allocated returns the bytes f allocated on the heap. Allocation counts,
// unlike timings, do not depend on how busy the machine is.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestNonRegularRunLogs: a run log replaced by a FIFO or by a symlink to
// /dev/zero must neither block nor be read without bound. Reading refuses
// it; the next append moves it aside and starts the file afresh.
func TestNonRegularRunLogs(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		make       func(t *testing.T, path string)
	}{
		{"fifo", "named pipe", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink to /dev/zero", "symlink", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}},
		// A link to a private file someone put in the logs dir: its
		// content must never be read into the run log, which the status
		// page serves, nor appended to.
		{"symlink to a private file", "symlink", func(t *testing.T, path string) {
			if err := os.Symlink(privateFile(t), path); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", "directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(t)
			var logs strings.Builder
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			l, err := Start(opts, "", RunStart)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(l.Path()); err != nil {
				t.Fatal(err)
			}
			tc.make(t, l.Path())

			testkit.NoHang(t, "Read", func() {
				_, err = l.Read()
			})
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.kind) || !strings.Contains(err.Error(), l.Path()) {
				t.Errorf("Read: %v, want ErrNotRegular naming the path and %q", err, tc.kind)
			}
			testkit.NoHang(t, "Append", func() {
				err = l.Append("after the damage")
			})
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if st, err := os.Lstat(l.Path() + ".damaged"); err != nil || st.Mode().IsRegular() {
				t.Errorf("the odd file was not moved aside intact: %v %v", st, err)
			}
			if !strings.Contains(logs.String(), "moved aside") || !strings.Contains(logs.String(), tc.kind) {
				t.Errorf("the move is not logged:\n%s", logs.String())
			}
			f := mustParse(t, readFile(t, l.Path()))
			if all := f.AllEntries(); !strings.HasSuffix(all[len(all)-1], " after the damage") {
				t.Errorf("entries %q", all)
			}
			if strings.Contains(readFile(t, l.Path()), privateText) {
				t.Errorf("the run log holds the linked file's text:\n%s", readFile(t, l.Path()))
			}
		})
	}
}

// privateText is privateFile's content.
const privateText = "root:$6$SECRETHASH:19000:0:99999:7:::\n"

// privateFile is a mode-0600 file outside the logs dir, checked at the
// end of the test to be as it was.
func privateFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(path, []byte(privateText), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if data, err := os.ReadFile(path); err != nil || string(data) != privateText {
			t.Errorf("the linked file was changed: %q, %v", data, err)
		}
	})
	return path
}

// TestHugeRunLog: a 50 MB run log (lavender never writes one; a person or
// another program did) is read as its last MaxBytes only, and the next
// append compacts it under the cap while reading a bounded amount.
func TestHugeRunLog(t *testing.T) {
	opts := testOptions(t)
	l, err := New(opts, "")
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(l.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	const lines = 600_000
	var chunk strings.Builder
	for i := range lines {
		fmt.Fprintf(&chunk, "00:41:41 entry %07d %s\n", i, strings.Repeat("x", 50))
		if chunk.Len() > 1<<20 || i == lines-1 {
			if _, err := fh.WriteString(chunk.String()); err != nil {
				t.Fatal(err)
			}
			chunk.Reset()
		}
	}
	fh.Close()
	st, _ := os.Stat(l.Path())
	t.Logf("run log of %d MB", st.Size()>>20)

	var data []byte
	alloc := allocated(func() { data, err = l.Read() })
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > DefaultMaxBytes || !strings.HasSuffix(string(data), fmt.Sprintf("entry %07d %s\n", lines-1, strings.Repeat("x", 50))) {
		t.Errorf("Read gave %d bytes ending %q, want at most %d ending in the last line", len(data), data[max(len(data)-40, 0):], DefaultMaxBytes)
	}
	if !strings.HasPrefix(string(data), "00:41:41 entry ") {
		t.Errorf("Read starts in the middle of a line: %q", data[:min(len(data), 40)])
	}
	if alloc > 1<<20 {
		t.Errorf("Read allocated %d bytes for a %d-byte cap", alloc, DefaultMaxBytes)
	}

	alloc = allocated(func() { err = l.Append("after") })
	if err != nil {
		t.Fatal(err)
	}
	if alloc > 8<<20 {
		t.Errorf("the repairing append allocated %d bytes", alloc)
	}
	got := readFile(t, l.Path())
	f := mustParse(t, got)
	if len(got) > DefaultMaxBytes {
		t.Errorf("%d bytes after the append, over the cap", len(got))
	}
	if f.First != "00:41:41 entry 0000000 "+strings.Repeat("x", 50) {
		t.Errorf("first entry %q, want the file's first line", f.First)
	}
	if f.Marker == nil || f.Marker.Dropped+uint64(len(f.Entries)) != lines {
		t.Errorf("marker %+v and %d entries kept: want every one of the %d lines accounted for", f.Marker, len(f.Entries), lines+1)
	}
}

// TestNewIsAtomic: a run that cannot be written completely does not
// appear at all, so a full disk never leaves an empty current run.
func TestNewIsAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(dir, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	opts := Options{Dir: dir, Now: fakeClock()}
	first, err := Start(opts, "the run before", RunStart)
	if err != nil {
		t.Fatal(err)
	}
	before := readFile(t, first.Path())
	filler, _ := os.Create(filepath.Join(dir, "filler"))
	for {
		if _, err := filler.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	filler.Close()
	if _, err := Start(opts, "device=cuda", RunStart); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Start on a full disk: %v, want no space left", err)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "run-*"))
	if len(runs) != 1 || runs[0] != first.Path() {
		t.Errorf("runs on disk after a failed start: %q, want only %s", runs, first.Path())
	}
	if cur, err := CurrentPath(dir); err != nil || cur != first.Path() {
		t.Errorf("current run %s (%v), want the one before", cur, err)
	}
	if got := readFile(t, first.Path()); got != before {
		t.Errorf("the run before changed:\n%s", got)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*"))
	if len(leftovers) != 0 {
		t.Errorf("temp files left: %v", leftovers)
	}
}

// TestCurrentIsTheRunCreatedLast: the current run is the one created last,
// even when its name sorts first because the creator's zone or clock
// differs.
func TestCurrentIsTheRunCreatedLast(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no tz database: %v", err)
	}
	for _, tc := range []struct {
		name          string
		first, second time.Time
	}{
		{"serve in UTC, runlog new in New York",
			time.Date(2026, 4, 24, 12, 0, 0, 0, time.UTC), time.Date(2026, 4, 24, 12, 0, 5, 0, time.UTC).In(ny)},
		{"clock stepped back an hour",
			time.Date(2026, 4, 24, 12, 0, 0, 0, time.UTC), time.Date(2026, 4, 24, 11, 0, 0, 0, time.UTC)},
		{"DST fall-back",
			time.Date(2026, 11, 1, 1, 50, 0, 0, ny), time.Date(2026, 11, 1, 1, 50, 0, 0, ny).Add(30 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			first, err := New(Options{Dir: dir, Now: func() time.Time { return tc.first }}, "")
			if err != nil {
				t.Fatal(err)
			}
			second, err := New(Options{Dir: dir, Now: func() time.Time { return tc.second }}, "")
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(second.Path()) >= filepath.Base(first.Path()) {
				t.Fatalf("the case proves nothing: %s sorts after %s", second.Path(), first.Path())
			}
			cur, err := CurrentPath(dir)
			if err != nil || cur != second.Path() {
				t.Errorf("current run %s (%v), want %s, created last", filepath.Base(cur), err, filepath.Base(second.Path()))
			}
			if err := AppendCurrent(Options{Dir: dir}, "BARK swap 54% sent ok=1 fail=0"); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(readFile(t, second.Path()), "BARK") || strings.Contains(readFile(t, first.Path()), "BARK") {
				t.Errorf("the append went to the wrong run")
			}
		})
	}
}

// TestEntriesStampedInTheFileZone: whoever appends, and in whatever zone,
// a file's entries are in the zone its title names.
func TestEntriesStampedInTheFileZone(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no tz database: %v", err)
	}
	dir := t.TempDir()
	start := time.Date(2026, 4, 24, 12, 0, 0, 0, time.UTC)
	l, err := Start(Options{Dir: dir, Now: func() time.Time { return start }}, "", RunStart)
	if err != nil {
		t.Fatal(err)
	}
	later := start.Add(time.Minute).In(ny) // 08:01 in New York
	other, err := Current(Options{Dir: dir, Now: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Append("from New York"); err != nil {
		t.Fatal(err)
	}
	f := mustParse(t, readFile(t, l.Path()))
	if f.Header[0] != "# lavender-2 run log 2026-04-24 12:00:00 +0000" {
		t.Errorf("title %q does not name its zone", f.Header[0])
	}
	if want := []string{"12:00:00 RUN start", "12:01:00 from New York"}; strings.Join(f.AllEntries(), "|") != strings.Join(want, "|") {
		t.Errorf("entries %q, want %q", f.AllEntries(), want)
	}
}

// TestFirstAppendRepairsAnyDamage: a hand edit that keeps the title and
// the final newline is repaired by the very next append, not only once the
// file reaches its cap.
func TestFirstAppendRepairsAnyDamage(t *testing.T) {
	title := "# lavender-2 run log 2026-04-24 00:41:41\n"
	for _, tc := range []struct{ name, body, kept string }{
		{"a line without a time", "00:41:41 RUN start\nnote by hand\n", "note by hand"},
		{"a 100-byte line", "00:41:41 RUN start\n00:41:42 " + strings.Repeat("w", 91) + "\n", strings.Repeat("w", 60)},
		{"two markers", "00:41:41 RUN start\n# [...compacted 1 lines, round 1]\n00:41:43 b\n# [...compacted 2 lines, round 2]\n00:41:44 c\n", "00:41:44 c"},
		{"invalid UTF-8", "00:41:41 RUN start\n00:41:42 bad \xff byte\n", "bad \uFFFD byte"},
		{"a blank line", "00:41:41 RUN start\n\n00:41:42 after a gap\n", "after a gap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "run-20260424-004141.log")
			if err := os.WriteFile(path, []byte(title+tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := Open(Options{Dir: dir, Now: fakeClock()}, path)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Append("appended"); err != nil {
				t.Fatal(err)
			}
			got := readFile(t, path)
			mustParse(t, got)
			if !strings.Contains(got, tc.kept) || !strings.HasSuffix(got, " appended\n") {
				t.Errorf("repaired file lost %q or the new entry:\n%s", tc.kept, got)
			}
		})
	}
}

// TestMoveAsideNumbers: damaged copies are numbered, never overwritten.
func TestMoveAsideNumbers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run-20260424-004141.phases.json")
	for i := range 3 {
		if err := os.WriteFile(path, []byte(fmt.Sprint("damage ", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		aside, err := MoveAside(path)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{".damaged", ".damaged-2", ".damaged-3"}[i]
		if aside != path+want {
			t.Errorf("copy %d moved to %s, want %s", i, filepath.Base(aside), filepath.Base(path+want))
		}
	}
	for i, suffix := range []string{".damaged", ".damaged-2", ".damaged-3"} {
		if got := readFile(t, path+suffix); got != fmt.Sprint("damage ", i) {
			t.Errorf("%s holds %q", suffix, got)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the original is still there: %v", err)
	}
}

// TestReadSavedFile: a saved file is decoded; none is no error; a FIFO, a
// file over the bound and one decode refuses are each moved aside, the
// error naming the file, its damage and where it went; a path that cannot
// be read (beneath a file) wraps ErrUnreadable.
func TestReadSavedFile(t *testing.T) {
	refuse := errors.New("version 7, want 1")
	for _, tc := range []struct {
		name       string
		make       func(path string) error
		found      bool
		want       string // in the error; "" for none
		aside      bool
		unreadable bool
	}{
		{"good", func(p string) error { return os.WriteFile(p, []byte("ok"), 0o600) }, true, "", false, false},
		{"missing", func(string) error { return nil }, false, "", false, false},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }, false, "state: read " + "%s: damaged: ", true, false},
		{"too large", func(p string) error { return os.WriteFile(p, make([]byte, 65), 0o600) }, false, "damaged: ", true, false},
		{"refused", func(p string) error { return os.WriteFile(p, []byte("bad"), 0o600) }, false, "damaged: version 7, want 1 (moved to state.json.damaged)", true, false},
		{"under a file", func(p string) error { // ENOTDIR: neither missing nor damaged
			if err := os.Remove(filepath.Dir(p)); err != nil {
				return err
			}
			return os.WriteFile(filepath.Dir(p), nil, 0o600)
		}, false, "cannot be read", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			if err := tc.make(path); err != nil {
				t.Fatal(err)
			}
			var decoded string
			found, err := ReadSavedFile(path, 64, "state: read", func(data []byte) error {
				if string(data) == "bad" {
					return refuse
				}
				decoded = string(data)
				return nil
			})
			if found != tc.found || (tc.found && decoded != "ok") {
				t.Errorf("found %v, decoded %q; want found %v", found, decoded, tc.found)
			}
			want := strings.ReplaceAll(tc.want, "%s", path)
			switch {
			case want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("error %v, want one with %q", err, want)
			}
			if errors.Is(err, ErrUnreadable) != tc.unreadable {
				t.Errorf("error %v: ErrUnreadable %v, want %v", err, errors.Is(err, ErrUnreadable), tc.unreadable)
			}
			_, serr := os.Lstat(path + ".damaged")
			if (serr == nil) != tc.aside {
				t.Errorf("moved aside: %v, want %v", serr == nil, tc.aside)
			}
		})
	}
}

// TestLogsDirIsAFIFO: the logs dir itself replaced by a FIFO makes every
// call fail with an error naming it, never block on opening it.
func TestLogsDirIsAFIFO(t *testing.T) {
	opts := testOptions(t)
	l, err := Start(opts, "", RunStart)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(opts.Dir); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(opts.Dir, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"CurrentPath", func() error { _, err := CurrentPath(opts.Dir); return err }},
		{"Append", func() error { return l.Append("into a FIFO") }},
		{"Start", func() error { _, err := Start(opts, "", RunStart); return err }},
		{"AppendCurrent", func() error { return AppendCurrent(opts, "into a FIFO") }},
	} {
		testkit.NoHang(t, tc.name, func() { err = tc.call() })
		if err == nil || !strings.Contains(err.Error(), opts.Dir) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, opts.Dir)
		}
	}
}
