package runlog

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A test binary re-executed with these variables set becomes a writer
// process instead of running tests.
const (
	childDirEnv    = "LAVENDER_RUNLOG_TEST_CHILD_DIR"
	childWriterEnv = "LAVENDER_RUNLOG_TEST_CHILD_WRITER"
	childLinesEnv  = "LAVENDER_RUNLOG_TEST_CHILD_LINES"
	childMeetEnv   = "LAVENDER_RUNLOG_TEST_CHILD_MEET"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		os.Exit(childWriter(dir, os.Getenv(childWriterEnv), os.Getenv(childLinesEnv), os.Getenv(childMeetEnv)))
	}
	os.Exit(m.Run())
}

// childWriter appends all but its last line, then waits for the other
// writer to get that far too, so both last lines are among the newest and
// must survive compaction.
func childWriter(dir, writer, lines, meet string) int {
	n, err := strconv.Atoi(lines)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	l, err := Current(Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for i := range n {
		if i == n-1 && !rendezvous(meet, writer) {
			fmt.Fprintln(os.Stderr, "the other writer never arrived")
			return 1
		}
		if err := l.Append(writerLine(writer, i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func rendezvous(meet, writer string) bool {
	if err := os.WriteFile(filepath.Join(meet, writer), nil, 0o644); err != nil {
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if entries, _ := os.ReadDir(meet); len(entries) == 2 {
			return true
		}
	}
	return false
}

func writerLine(writer string, i int) string {
	return fmt.Sprintf("writer %s line %04d %s", writer, i, strings.Repeat(writer, 40))
}

func TestTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const lines = 500
	dir, meet := t.TempDir(), t.TempDir()
	l, err := Start(Options{Dir: dir}, "two writers", RunStart)
	if err != nil {
		t.Fatal(err)
	}
	var children []*exec.Cmd
	done := make(chan error, 2)
	for _, w := range []string{"a", "b"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childWriterEnv+"="+w, childLinesEnv+"="+strconv.Itoa(lines), childMeetEnv+"="+meet)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children = append(children, cmd)
		go func() { done <- cmd.Wait() }()
	}

	// Sample the file as a reader would, until both writers are done.
	samples, oversized, unparsable := 0, 0, 0
	var firstBad string
	deadline := time.After(60 * time.Second)
	for finished := 0; finished < 2; {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("writer failed: %v", err)
			}
			finished++
		case <-deadline:
			for _, c := range children {
				c.Process.Kill()
			}
			t.Fatal("writers did not finish within 60s")
		default:
			data, err := os.ReadFile(l.Path())
			if err != nil {
				t.Fatal(err)
			}
			samples++
			if len(data) > DefaultMaxBytes {
				oversized++
			}
			if _, err := Parse(data); err != nil {
				unparsable++
				if firstBad == "" {
					firstBad = fmt.Sprintf("%v\n%s", err, data)
				}
			}
		}
	}
	t.Logf("%d samples while two processes appended %d lines each", samples, lines)
	if samples == 0 {
		t.Fatal("no samples taken")
	}
	if oversized > 0 {
		t.Errorf("%d of %d samples over the cap", oversized, samples)
	}
	if unparsable > 0 {
		t.Errorf("%d of %d samples did not parse; first: %s", unparsable, samples, firstBad)
	}

	data := readFile(t, l.Path())
	f := mustParse(t, data)
	valid := map[string]bool{}
	for _, w := range []string{"a", "b"} {
		for i := range lines {
			valid[writerLine(w, i)] = true
		}
	}
	for _, e := range f.Entries {
		if !valid[e[9:]] {
			t.Errorf("torn or foreign line: %q", e)
		}
	}
	for _, w := range []string{"a", "b"} {
		if newest := writerLine(w, lines-1); !strings.Contains(data, newest) {
			t.Errorf("newest line of writer %s missing:\n%s", w, data)
		}
	}
	if got := f.Marker.Dropped + uint64(len(f.Entries)); got != 2*lines {
		t.Errorf("dropped + kept = %d, want %d", got, 2*lines)
	}
}
