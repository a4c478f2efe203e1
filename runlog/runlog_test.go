package runlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// fakeClock starts at the predecessor's example run and ticks a second per call.
func fakeClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 4, 24, 0, 41, 41, 0, time.Local)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now := t
		t = t.Add(time.Second)
		return now
	}
}

// exampleTitle is the title of a run fakeClock starts: its time and the
// offset of the local zone then.
var exampleTitle = "# lavender-2 run log 2026-04-24 00:41:41 " + time.Date(2026, 4, 24, 0, 41, 41, 0, time.Local).Format("-0700")

func testOptions(t *testing.T) Options {
	t.Helper()
	return Options{Dir: t.TempDir(), Now: fakeClock()}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func mustParse(t *testing.T, data string) *File {
	t.Helper()
	f, err := Parse([]byte(data))
	if err != nil {
		t.Fatalf("%v\n--- file ---\n%s", err, data)
	}
	return f
}

func TestStartWritesHeaderAndFirstEntry(t *testing.T) {
	for _, tc := range []struct {
		name, header, want string
	}{
		{
			name:   "with header text",
			header: "device=cuda lavender_2=v0.2.3",
			want: exampleTitle + "\n" +
				"# device=cuda lavender_2=v0.2.3\n" +
				"00:41:42 RUN start  device=cuda\n",
		},
		{
			name: "without header text",
			want: exampleTitle + "\n" +
				"00:41:42 RUN start  device=cuda\n",
		},
		{
			name:   "header text on one line and clipped",
			header: "a\nb\t" + strings.Repeat("x", 100),
			want: exampleTitle + "\n" +
				"# a b " + strings.Repeat("x", 80-len("# a b ")-len("…")) + "…\n" +
				"00:41:42 RUN start  device=cuda\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(t)
			l, err := Start(opts, tc.header, "RUN start  device=cuda")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := filepath.Base(l.Path()), "run-20260424-004141.log"; got != want {
				t.Errorf("file name %q, want %q", got, want)
			}
			if got := readFile(t, l.Path()); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestEntryShaping(t *testing.T) {
	long := strings.Repeat("é", 60) // 120 bytes of two-byte runes
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"plain", "START Building model", "00:41:42 START Building model"},
		{"newlines and controls become spaces", "a\nb\r\nc\td\x00e\x1bf", "00:41:42 a b  c d e f"},
		{"unicode line separators", "a\u2028b\u2029c", "00:41:42 a b c"},
		{"invalid UTF-8 replaced", "bad\xffbyte", "00:41:42 bad\uFFFDbyte"},
		{"cut on a rune boundary with an ellipsis", long, "00:41:42 " + strings.Repeat("é", 34) + "…"},
		{"exactly 80 bytes kept whole", strings.Repeat("x", 71), "00:41:42 " + strings.Repeat("x", 71)},
		{"81 bytes cut", strings.Repeat("x", 72), "00:41:42 " + strings.Repeat("x", 68) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(t)
			l, err := New(opts, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Append(tc.msg); err != nil {
				t.Fatal(err)
			}
			f := mustParse(t, readFile(t, l.Path()))
			if f.First != tc.want {
				t.Errorf("entry %q, want %q", f.First, tc.want)
			}
			if len(f.First) > MaxLineBytes || !utf8.ValidString(f.First) {
				t.Errorf("entry is %d bytes or invalid UTF-8: %q", len(f.First), f.First)
			}
		})
	}
}

func TestNameCollisionAndCurrent(t *testing.T) {
	opts := Options{Dir: t.TempDir(), Now: func() time.Time { return time.Date(2026, 4, 24, 0, 41, 41, 0, time.Local) }}
	var names []string
	for range 11 {
		l, err := New(opts, "")
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(l.Path()))
	}
	want := []string{"run-20260424-004141.log", "run-20260424-004141-2.log", "run-20260424-004141-3.log"}
	for i, w := range want {
		if names[i] != w {
			t.Errorf("run %d named %q, want %q", i+1, names[i], w)
		}
	}
	// -11 sorts before -2 as text; the current run must still be the 11th.
	cur, err := CurrentPath(opts.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(cur); got != "run-20260424-004141-11.log" {
		t.Errorf("current run %q, want the eleventh", got)
	}

	// A later run without a suffix is newer than every suffixed earlier one.
	later := opts
	later.Now = func() time.Time { return time.Date(2026, 4, 24, 0, 41, 42, 0, time.Local) }
	if _, err := New(later, ""); err != nil {
		t.Fatal(err)
	}
	// Files that merely look similar are ignored.
	for _, junk := range []string{"run-20990101-000000.log.bak", "notes.log", ".run-20990101-000000.log.tmp-1"} {
		if err := os.WriteFile(filepath.Join(opts.Dir, junk), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cur, err = CurrentPath(opts.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(cur); got != "run-20260424-004142.log" {
		t.Errorf("current run %q, want run-20260424-004142.log", got)
	}
}

func TestBadDirectories(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	blocked := filepath.Join(file, "logs") // a dir under a regular file: fails even for root

	if _, err := New(Options{Dir: blocked}, ""); err == nil || !strings.Contains(err.Error(), blocked) {
		t.Errorf("New in %s: error %v does not name the path", blocked, err)
	}
	missing := filepath.Join(base, "never-created")
	if _, err := Current(Options{Dir: missing}); !errors.Is(err, ErrNoRun) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Current in a missing dir: %v, want ErrNoRun naming %s", err, missing)
	}
	if _, err := New(Options{Dir: base, MaxBytes: 255}, ""); err == nil || !strings.Contains(err.Error(), "256") {
		t.Errorf("a cap of 255 bytes: %v, want an error naming the minimum", err)
	}

	// The dir disappears under a running log: Append reports it, naming the path.
	dir := filepath.Join(base, "vanishing")
	l, err := Start(Options{Dir: dir}, "", RunStart)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := l.Append("after the dir went away"); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("Append into a removed dir: %v, want an error naming %s", err, dir)
	}
}

// TestPredecessorFigure repeats the predecessor's own check: 100 writes of
// about 80 bytes each.
func TestPredecessorFigure(t *testing.T) {
	opts := testOptions(t)
	l, err := Start(opts, "device=cuda lavender_2=v0.2.3", RunStart)
	if err != nil {
		t.Fatal(err)
	}
	var written []string
	for i := range 100 {
		msg := fmt.Sprintf("step %03d loss=%.4f %s", i, 1/float64(i+1), strings.Repeat("x", 50))
		if err := l.Append(msg); err != nil {
			t.Fatal(err)
		}
		written = append(written, entryLine(opts.Now(), msg)) // the clock ticked once in Append
		if st, err := os.Stat(l.Path()); err != nil || st.Size() > DefaultMaxBytes {
			t.Fatalf("after append %d: size %v, err %v", i+1, st.Size(), err)
		}
	}
	data := readFile(t, l.Path())
	f := mustParse(t, data)
	t.Logf("100 appends: %d bytes, %d rounds, %d lines compacted, %d entries kept after the first",
		len(data), f.Marker.Rounds, f.Marker.Dropped, len(f.Entries))

	if len(data) > DefaultMaxBytes {
		t.Errorf("file is %d bytes, over the cap", len(data))
	}
	if f.Marker == nil || f.Marker.Rounds < 10 {
		t.Fatalf("marker %+v, want at least 10 rounds", f.Marker)
	}
	wantHeader := []string{exampleTitle, "# device=cuda lavender_2=v0.2.3"}
	if strings.Join(f.Header, "\n") != strings.Join(wantHeader, "\n") {
		t.Errorf("header %q, want %q", f.Header, wantHeader)
	}
	if f.First != "00:41:42 RUN start" {
		t.Errorf("first entry %q, want the RUN start line", f.First)
	}
	if strings.Count(data, "# [...compacted") != 1 {
		t.Errorf("want exactly one marker line:\n%s", data)
	}
	// Entries are written with a clock that ticks twice per append (once in
	// Append, once above), so compare by message rather than by time.
	if len(f.Entries) < 4 {
		t.Fatalf("only %d entries kept", len(f.Entries))
	}
	for i := 1; i <= 4; i++ {
		got := f.Entries[len(f.Entries)-i]
		want := written[len(written)-i]
		if got[9:] != want[9:] {
			t.Errorf("entry -%d is %q, want %q", i, got, want)
		}
	}
	// The marker counts every entry that is gone: 100 written, minus those kept.
	if got, want := f.Marker.Dropped, uint64(100-len(f.Entries)); got != want {
		t.Errorf("marker counts %d dropped, want %d", got, want)
	}
}

func TestRepairsForeignFiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		check   func(t *testing.T, f *File)
	}{
		{
			name:    "no header",
			content: "hand written note\n12:00:00 START Pretrain 1/3\n",
			check: func(t *testing.T, f *File) {
				if f.Header[0] != exampleTitle {
					t.Errorf("title %q, want one restored from the file name", f.Header[0])
				}
				if f.First != "00:41:41 hand written note" || f.Entries[0] != "12:00:00 START Pretrain 1/3" || f.Marker != nil {
					t.Errorf("first %q marker %v: the hand-written line must be kept, nothing dropped", f.First, f.Marker)
				}
			},
		},
		{
			name:    "over the cap",
			content: "# lavender-2 run log 2026-04-24 00:41:41\n" + strings.Repeat("00:41:41 "+strings.Repeat("y", 60)+"\n", 40),
			check: func(t *testing.T, f *File) {
				if f.Marker == nil || f.Marker.Rounds != 1 {
					t.Errorf("marker %+v, want one round", f.Marker)
				}
			},
		},
		{
			name:    "no trailing newline and a long line",
			content: "# lavender-2 run log 2026-04-24 00:41:41\n" + strings.Repeat("z", 300),
			check: func(t *testing.T, f *File) {
				if f.First != "00:41:41 "+strings.Repeat("z", 68)+"…" {
					t.Errorf("first %q, want the long line clipped", f.First)
				}
			},
		},
		{
			name:    "empty file",
			content: "",
			check: func(t *testing.T, f *File) {
				if len(f.Header) != 1 || f.First != "00:41:41 appended" {
					t.Errorf("got %+v", f)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "run-20260424-004141.log")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := Current(Options{Dir: dir, Now: fakeClock()})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Append("appended"); err != nil {
				t.Fatal(err)
			}
			data := readFile(t, path)
			if len(data) > DefaultMaxBytes {
				t.Errorf("%d bytes, over the cap", len(data))
			}
			f := mustParse(t, data)
			if last := f.AllEntries()[len(f.AllEntries())-1]; last != "00:41:41 appended" {
				t.Errorf("newest entry %q", last)
			}
			tc.check(t, f)
		})
	}
}

func TestSmallestCap(t *testing.T) {
	opts := testOptions(t)
	opts.MaxBytes = MinMaxBytes
	l, err := Start(opts, strings.Repeat("h", 100), strings.Repeat("f", 100))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		msg := fmt.Sprintf("%d %s", i, strings.Repeat("m", 100))
		if err := l.Append(msg); err != nil {
			t.Fatal(err)
		}
		data := readFile(t, l.Path())
		if len(data) > MinMaxBytes {
			t.Fatalf("append %d: %d bytes, over %d", i, len(data), MinMaxBytes)
		}
		f := mustParse(t, data)
		if len(f.Header) != 2 {
			t.Fatalf("append %d: header lost: %q", i, f.Header)
		}
		all := f.AllEntries()
		if got := all[len(all)-1]; !strings.Contains(got, fmt.Sprintf(" %d m", i)) {
			t.Fatalf("append %d: newest entry %q", i, got)
		}
	}
}

func TestConcurrentGoroutines(t *testing.T) {
	opts := Options{Dir: t.TempDir()}
	l, err := Start(opts, "", RunStart)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				if err := l.Append(fmt.Sprintf("goroutine %d line %d %s", g, i, strings.Repeat("g", 40))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	data := readFile(t, l.Path())
	f := mustParse(t, data)
	if len(data) > DefaultMaxBytes {
		t.Errorf("%d bytes, over the cap", len(data))
	}
	if got := f.Marker.Dropped + uint64(len(f.Entries)); got != 400 {
		t.Errorf("dropped + kept = %d, want the 400 appended", got)
	}
}

func TestAppendCurrentFollowsNewRuns(t *testing.T) {
	opts := testOptions(t)
	if err := AppendCurrent(opts, "BARK swap 54% sent ok=1 fail=0"); err != nil {
		t.Fatal(err)
	}
	first, err := CurrentPath(opts.Dir)
	if err != nil {
		t.Fatal(err)
	}
	f := mustParse(t, readFile(t, first))
	if f.First != "00:41:42 RUN start" || f.Entries[0] != "00:41:43 BARK swap 54% sent ok=1 fail=0" {
		t.Errorf("a run must be started before the first entry: %+v", f)
	}
	second, err := Start(opts, "", RunStart)
	if err != nil {
		t.Fatal(err)
	}
	if err := AppendCurrent(opts, "BARK swap 60% sent ok=1 fail=0"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readFile(t, second.Path()), "swap 60%") || strings.Contains(readFile(t, first), "swap 60%") {
		t.Error("AppendCurrent did not follow the newer run")
	}
}

func TestParseRejects(t *testing.T) {
	title := "# lavender-2 run log 2026-04-24 00:41:41\n"
	for _, tc := range []struct{ name, data, want string }{
		{"empty", "", "empty"},
		{"unterminated", title + "00:41:41 x", "not terminated"},
		{"no title", "00:41:41 x\n", "title"},
		{"two markers", title + "00:41:41 a\n# [...compacted 1 lines, round 1]\n# [...compacted 2 lines, round 2]\n", "second marker"},
		{"not an entry", title + "hello\n", "not an entry"},
		{"long line", title + "00:41:41 " + strings.Repeat("x", 80) + "\n", "over 80"},
		{"invalid UTF-8", title + "00:41:41 \xff\n", "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestWritersThatFindNoRunShareOne: writers that each find no run, at
// once (two `runlog append`s, a heartbeat and a push), start one run
// between them, and every entry is in it, not in runs nobody follows.
func TestWritersThatFindNoRunShareOne(t *testing.T) {
	for try := range 20 {
		dir := t.TempDir()
		const writers = 8
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range writers {
			wg.Go(func() {
				<-gate
				if err := AppendCurrent(Options{Dir: dir}, fmt.Sprintf("BARK entry %d", i)); err != nil {
					t.Error(err)
				}
			})
		}
		close(gate)
		wg.Wait()
		var runs []string
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if nameRE.MatchString(e.Name()) {
				runs = append(runs, e.Name())
			}
		}
		if len(runs) != 1 {
			t.Fatalf("try %d: %d runs started: %v", try, len(runs), runs)
		}
		data, err := os.ReadFile(filepath.Join(dir, runs[0]))
		if err != nil {
			t.Fatal(err)
		}
		for i := range writers {
			if want := fmt.Sprintf("BARK entry %d", i); !strings.Contains(string(data), want) {
				t.Errorf("try %d: the run lacks %q:\n%s", try, want, data)
			}
		}
		if n := strings.Count(string(data), RunStart); n != 1 {
			t.Errorf("try %d: %d %q lines, want 1:\n%s", try, n, RunStart, data)
		}
	}
}
