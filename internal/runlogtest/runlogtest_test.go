package runlogtest

import (
	"slices"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/runlog"
)

func TestEntries(t *testing.T) {
	dir := t.TempDir()
	if got := Entries(t, dir); got != nil {
		t.Fatalf("entries of a dir with no run: %q", got)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l, err := runlog.Start(runlog.Options{Dir: dir, Now: func() time.Time { return now }}, "device=cpu", runlog.RunStart)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append("START Pretrain"); err != nil {
		t.Fatal(err)
	}
	want := []string{runlog.RunStart, "START Pretrain"}
	if got := Entries(t, dir); !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	if got := EntriesOf(t, Text(t, dir)); !slices.Equal(got, want) {
		t.Errorf("entries of the text %q, want %q", got, want)
	}
}
