package watchpush

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/watchdog"
)

// TestStormSummaryCountsWatchdogEvents: watchdog pushes that each join ten
// failed phases, held by storm control, come back in the summary as the
// phases they were about, in the words of the pushes ("phase failed ×50"),
// not as the rules joined with '+' and counted by push ("failed+failed+……
// ×5").
func TestStormSummaryCountsWatchdogEvents(t *testing.T) {
	srv := barktest.New(t)
	clock := newTestClock()
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) {
		c.Now, c.MaxPerMinute = clock.Now, 1
	})
	if ok, _ := f.pusher.Push(t.Context(), []watchdog.Alert{swapAlert(0.6, giBytes(19.2), 32*bytesPerGiB)}); ok != 1 {
		t.Fatal("first push not sent")
	}
	for push := range 5 {
		var poll []watchdog.Alert
		for i := range 10 {
			poll = append(poll, endedPhaseAlert(watchdog.RuleFailed, fmt.Sprintf("shard %d-%d", push, i), time.Hour))
		}
		if push == 4 {
			poll = append(poll, silentPhaseAlert("eval", 20*time.Minute), swapAlert(0.7, giBytes(22.4), 32*bytesPerGiB))
		}
		if ok, failed := f.pusher.Push(t.Context(), poll); ok != 1 || failed != 0 {
			t.Fatalf("push %d: ok=%d failed=%d, want it held (1, 0)", push, ok, failed)
		}
	}
	clock.Advance(time.Minute)
	f.bridge.SendDue(t.Context(), clock.Now())
	got := srv.Pushes()
	if len(got) != 2 {
		t.Fatalf("%d pushes, want the first and the summary", len(got))
	}
	if want := "[lavender-2] 52 more alerts in the last minute: phase failed ×50, phase stalled ×1, swap high ×1"; got[1].Body != want {
		t.Errorf("summary\n got %q\nwant %q", got[1].Body, want)
	}
	if lines := f.barkLines(); len(lines) != 2 || lines[1] != "BARK 52 more alerts sent ok=1 fail=0" {
		t.Errorf("run log %q", lines)
	}
}

// TestStormSummaryWordsEveryWatchdogRule: every kind of watchdog push is
// listed in a summary by its words (pushtext.SummaryName), rather than as
// "watchdog disk-space".
func TestStormSummaryWordsEveryWatchdogRule(t *testing.T) {
	for _, event := range pushtext.Events {
		words, ok := pushtext.SummaryName(event)
		if !ok {
			t.Errorf("no summary words for the watchdog's %q pushes", event)
			continue
		}
		if got := stormEvent(watchdog.Alert{Rule: event}); got.Words != words || !strings.Contains(got.Words, " ") {
			t.Errorf("%s is listed as %q, want %q, with a space no alert name has", event, got.Words, words)
		}
	}
	if got := stormEvent(watchdog.Alert{Rule: "mystery"}); got.Words != "watchdog mystery" {
		t.Errorf("a rule without words is listed as %q, want \"watchdog mystery\"", got.Words)
	}
}
