package runlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// noHang runs f and fails the test if it has not returned after a minute:
// a guard against a read that blocks for ever, not a speed check.
func noHang(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return within a minute: it blocks", what)
	}
}

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
		{"symlink to /dev/zero", "device", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
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
			l, err := Start(opts, "", RunStart)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(l.Path()); err != nil {
				t.Fatal(err)
			}
			tc.make(t, l.Path())

			noHang(t, "Read", func() {
				_, err = l.Read()
			})
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.kind) || !strings.Contains(err.Error(), l.Path()) {
				t.Errorf("Read: %v, want ErrNotRegular naming the path and %q", err, tc.kind)
			}
			noHang(t, "Append", func() {
				err = l.Append("after the damage")
			})
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if st, err := os.Lstat(l.Path() + ".damaged"); err != nil || st.Mode().IsRegular() {
				t.Errorf("the odd file was not moved aside intact: %v %v", st, err)
			}
			f := mustParse(t, readFile(t, l.Path()))
			if all := f.AllEntries(); !strings.HasSuffix(all[len(all)-1], " after the damage") {
				t.Errorf("entries %q", all)
			}
		})
	}
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
