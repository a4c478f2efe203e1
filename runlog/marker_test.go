package runlog

import (
	"fmt"
	"strings"
	"testing"
)

// TestHeaderCannotFakeTheMarker: a run header is free text from the user
// (`runlog new --header`, POST /api/v1/runs), so one that reads like the
// compaction marker must not be taken for it: the counts stay runlog's own
// and the file shows one marker line, the one runlog wrote.
func TestHeaderCannotFakeTheMarker(t *testing.T) {
	for _, fake := range []string{
		"[...compacted 999 lines, round 99]",
		"[...compacted 0 lines, round 0]",
	} {
		t.Run(fake, func(t *testing.T) {
			opts := testOptions(t)
			l, err := Start(opts, fake, RunStart)
			if err != nil {
				t.Fatal(err)
			}
			const appends = 40
			for i := range appends {
				if err := l.Append(fmt.Sprintf("step %03d %s", i, strings.Repeat("x", 50))); err != nil {
					t.Fatal(err)
				}
			}
			data := readFile(t, l.Path())
			f := mustParse(t, data)
			if f.Marker == nil {
				t.Fatalf("no marker after %d appends:\n%s", appends, data)
			}
			if got := strings.Count(data, "# [...compacted"); got != 1 {
				t.Errorf("%d lines start like the marker, want the one runlog wrote:\n%s", got, data)
			}
			if want := uint64(appends - len(f.Entries)); f.Marker.Dropped != want || f.Marker.Rounds > appends {
				t.Errorf("marker %+v, want %d lines dropped in at most %d rounds:\n%s", *f.Marker, want, appends, data)
			}
			if len(f.Header) != 2 || !strings.Contains(f.Header[1], fake) {
				t.Errorf("header %q, want the text kept, as text", f.Header)
			}
		})
	}
}
