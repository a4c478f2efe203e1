// Package runlogtest reads run logs for the tests of every package that
// writes them: the text of the current run, checked against the cap and the
// log's shape, and its entries without their times. It is apart from
// internal/testkit because it imports runlog, whose own tests use the kit.
package runlogtest

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/runlog"
)

// Text returns the current run log of dir. It fails the test when there is
// none, when the file is over runlog.DefaultMaxBytes, or when it does not
// parse: every writer must leave the log whole and within its cap.
func Text(t testing.TB, dir string) string {
	t.Helper()
	path, err := runlog.CurrentPath(dir)
	if err != nil {
		t.Fatalf("run log: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > runlog.DefaultMaxBytes {
		t.Errorf("run log is %d bytes, over the cap of %d", len(data), runlog.DefaultMaxBytes)
	}
	if _, err := runlog.Parse(data); err != nil {
		t.Errorf("run log does not parse: %v\n%s", err, data)
	}
	return string(data)
}

// Entries returns the current run's entries in dir without their times, or
// nil when dir holds no run yet.
func Entries(t testing.TB, dir string) []string {
	t.Helper()
	l, err := runlog.Current(runlog.Options{Dir: dir})
	if errors.Is(err, runlog.ErrNoRun) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := l.Read()
	if err != nil {
		t.Fatal(err)
	}
	return EntriesOf(t, string(data))
}

// EntriesOf returns the entries of a run log's text without their times.
func EntriesOf(t testing.TB, text string) []string {
	t.Helper()
	f, err := runlog.Parse([]byte(text))
	if err != nil {
		t.Fatalf("run log does not parse: %v\n%s", err, text)
	}
	var out []string
	for _, e := range f.AllEntries() {
		out = append(out, e[len("15:04:05 "):])
	}
	return out
}

// BarkLines returns the BARK entries of the current run in dir, without
// their times: the record of every push attempt.
func BarkLines(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	for _, e := range Entries(t, dir) {
		if strings.HasPrefix(e, "BARK ") {
			out = append(out, e)
		}
	}
	return out
}
