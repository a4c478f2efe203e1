package barkbridge

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lavender/internal/barktest"
	"lavender/pushtext"
	"lavender/watchdog"
)

// TestStormSummaryCountsWatchdogEvents: watchdog pushes that each join ten
// failed phases, held by storm control, come back in the summary as the
// phases they were about, in the words of the pushes ("phase failed ×50"),
// not as the rules joined with '+' and counted by push ("failed+failed+……
// ×5").
func TestStormSummaryCountsWatchdogEvents(t *testing.T) {
	srv := barktest.New(t)
	clock := newTestClock()
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *Config) {
		c.Now, c.MaxPerMinute = clock.Now, 1
	})
	if ok, _ := f.bridge.Push(t.Context(), []watchdog.Alert{swapAlert(0.6, giBytes(19.2), 32*bytesPerGiB)}); ok != 1 {
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
		if ok, failed := f.bridge.Push(t.Context(), poll); ok != 1 || failed != 0 {
			t.Fatalf("push %d: ok=%d failed=%d, want it held (1, 0)", push, ok, failed)
		}
	}
	clock.Advance(time.Minute)
	f.bridge.sendDue(t.Context(), clock.Now())
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

// TestStormSummaryNamesCannotFakeItsCounts: whatever an alert is named, the
// summary's own structure (", " between items, " ×N" after each, the
// "other alerts" fold) stays the summary's: a name that is not one word of
// letters, digits and _ : . - is quoted, its quotes and × signs replaced.
func TestStormSummaryNamesCannotFakeItsCounts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		held  []stormEvent
		want  string
		items int // items the text lists, folds included
	}{
		{"a name with a count", alerts("SwapUsageHigh ×50"),
			`1 more alert in the last minute: "SwapUsageHigh x50" ×1`, 1},
		{"a name that lists more items", alerts("A ×50, B"),
			`1 more alert in the last minute: "A x50, B" ×1`, 1},
		{"a name with quotes", alerts(`A" ×9, "B`),
			`1 more alert in the last minute: "A' x9, 'B" ×1`, 1},
		{"a name joined like a watchdog push", alerts("failed+failed"),
			`1 more alert in the last minute: "failed+failed" ×1`, 1},
		{"a name posing as the fold", alerts("other alerts ×40", "others"),
			`2 more alerts in the last minute: "other alerts x40" ×1, others ×1`, 2},
		{"a name posing as a watchdog event", append(alerts("phase stalled"), stormEvent{Watchdog: string(watchdog.RuleStalled)}),
			`2 more alerts in the last minute: "phase stalled" ×1, phase stalled ×1`, 2},
		{"a right-to-left override", alerts("Swap\u202e05× hgiH"),
			`1 more alert in the last minute: "Swap05x hgiH" ×1`, 1},
		{"a cut name is quoted and marked", alerts(strings.Repeat("A", 100)),
			`1 more alert in the last minute: "` + strings.Repeat("A", stormMaxNameBytes-len("…")) + `…" ×1`, 1},
		{"unnamed and resolved", []stormEvent{alertEvent("", false), alertEvent("DiskFull", true), alertEvent("Disk full", true)},
			`3 more alerts in the last minute: "Disk full" resolved ×1, DiskFull resolved ×1, unnamed alert ×1`, 3},
		{"names in other scripts stand bare", alerts("交换空间不足", "Speicher_voll"),
			`2 more alerts in the last minute: Speicher_voll ×1, 交换空间不足 ×1`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := newStormLimiter(1, "")
			if err != nil {
				t.Fatal(err)
			}
			l.Allow("t", alerts("first"), stormAt(0))
			for _, e := range tc.held {
				if l.Allow("t", []stormEvent{e}, stormAt(time.Second)) {
					t.Fatalf("%+v allowed past the limit", e)
				}
			}
			sums := l.Due(stormAt(time.Minute))
			if len(sums) != 1 {
				t.Fatalf("summaries %+v", sums)
			}
			text := sums[0].Text
			if text != tc.want {
				t.Errorf("summary\n got %q\nwant %q", text, tc.want)
			}
			// Outside quotes, the text has one " ×" per item and the
			// items add up to the total.
			outside, total := unquoted(text), 0
			for _, part := range strings.Split(outside, "×")[1:] {
				var n int
				fmt.Sscanf(part, "%d", &n)
				total += n
			}
			if n := strings.Count(outside, " ×"); n != tc.items || total != len(tc.held) || strings.Count(text, "×") != tc.items {
				t.Errorf("%d counts adding up to %d outside quotes (%d × in all), want %d adding up to %d: %q",
					n, total, strings.Count(text, "×"), tc.items, len(tc.held), text)
			}
		})
	}
}

// unquoted is s without its double-quoted parts.
func unquoted(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		if r == '"' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
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
		if got := (stormEvent{Watchdog: string(event)}).label(); got != words || !strings.Contains(got, " ") {
			t.Errorf("%s is listed as %q, want %q, with a space no alert name has", event, got, words)
		}
	}
	if got := (stormEvent{Watchdog: "mystery"}).label(); got != "watchdog mystery" {
		t.Errorf("a rule without words is listed as %q, want \"watchdog mystery\"", got)
	}
}
