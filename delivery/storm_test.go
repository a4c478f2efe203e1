package delivery

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/bark"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var stormT0 = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

func stormAt(d time.Duration) time.Time { return stormT0.Add(d) }

func mustStorm(t *testing.T, max int) *stormLimiter {
	t.Helper()
	l, err := newStormLimiter(max, "[lavender-2]")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A storm of 100 alerts in a minute to one phone: 10 pushes, then one
// summary of the other 90 when the first push is a minute old.
func TestStormHundredAlertsGiveTenPushesAndOneSummary(t *testing.T) {
	l := mustStorm(t, DefaultMaxPerMinute)
	const target = "phone.bark.env:1"
	allowed := 0
	for i := range 100 {
		name := "SwapUsageHigh"
		if i%10 < 3 {
			name = "PhaseStalled"
		}
		now := stormAt(time.Duration(i) * 590 * time.Millisecond) // 0 … 58.41 s
		if l.Allow(target, alerts(name), now) {
			allowed++
		}
		if got := l.Due(now); len(got) != 0 {
			t.Fatalf("summary at %s, before the window closed: %+v", now.Sub(stormT0), got)
		}
	}
	if allowed != 10 {
		t.Fatalf("%d pushes allowed, want 10", allowed)
	}
	if got := testutil.ToFloat64(l.held.WithLabelValues(target)); got != 90 {
		t.Errorf("%s = %g, want 90", HeldPushesMetric, got)
	}
	if got := l.Due(stormAt(time.Minute - time.Nanosecond)); len(got) != 0 {
		t.Fatalf("summary a nanosecond early: %+v", got)
	}
	sums := l.Due(stormAt(time.Minute))
	if len(sums) != 1 {
		t.Fatalf("%d summaries, want 1: %+v", len(sums), sums)
	}
	s := sums[0]
	if want := "[lavender-2] 90 more alerts in the last minute: SwapUsageHigh ×63, PhaseStalled ×27"; s.Text != want {
		t.Errorf("summary\n got %q\nwant %q", s.Text, want)
	}
	if s.Target != target || s.Held != 90 || s.Subject() != "90 more alerts" ||
		fmt.Sprint(s.Counts) != "[{SwapUsageHigh 63} {PhaseStalled 27}]" {
		t.Errorf("summary %+v", s)
	}
	// Only once.
	for _, d := range []time.Duration{time.Minute, 61 * time.Second, 2 * time.Minute, time.Hour} {
		if got := l.Due(stormAt(d)); len(got) != 0 {
			t.Errorf("second summary at %s: %+v", d, got)
		}
	}
}

func TestStormSummaryText(t *testing.T) {
	for _, tc := range []struct {
		name   string
		held   []string
		prefix string
		want   string
	}{
		{"documented example", append(repeatName("SwapUsageHigh", 30), repeatName("PhaseStalled", 7)...), "[lavender-2]",
			"[lavender-2] 37 more alerts in the last minute: SwapUsageHigh ×30, PhaseStalled ×7"},
		{"ties by name", []string{"B", "A", "C", "C"}, "[lavender-2]",
			"[lavender-2] 4 more alerts in the last minute: C ×2, A ×1, B ×1"},
		{"one", []string{"OOMKill"}, "[gpu-farm]", "[gpu-farm] 1 more alert in the last minute: OOMKill ×1"},
		{"no prefix", []string{"X", "X"}, "", "2 more alerts in the last minute: X ×2"},
		{"odd names", []string{"Swap\nUsage\tHigh", "", " \x00 "}, "[lavender-2]",
			"[lavender-2] 3 more alerts in the last minute: unnamed alert ×2, \"Swap Usage High\" ×1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := newStormLimiter(1, tc.prefix)
			if err != nil {
				t.Fatal(err)
			}
			if !l.Allow("t", alerts("first"), stormAt(0)) {
				t.Fatal("first push held")
			}
			for _, n := range tc.held {
				if l.Allow("t", alerts(n), stormAt(time.Second)) {
					t.Fatalf("%q allowed past the limit", n)
				}
			}
			sums := l.Due(stormAt(time.Minute))
			if len(sums) != 1 || sums[0].Text != tc.want {
				t.Fatalf("got %+v\nwant text %q", sums, tc.want)
			}
		})
	}
}

func repeatName(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestStormTargetsIndependent(t *testing.T) {
	l := mustStorm(t, 10)
	for i := range 30 {
		now := stormAt(time.Duration(i) * time.Second)
		a := l.Allow("a.bark.env:1", alerts("SwapUsageHigh"), now)
		if want := i < 10; a != want {
			t.Fatalf("a, alert %d: allowed=%v", i, a)
		}
		if i < 5 { // b gets 5 alerts, within its own limit
			if !l.Allow("b.bark.env:1", alerts("PhaseStalled"), now) {
				t.Fatalf("b held at alert %d because of a's storm", i)
			}
		}
	}
	for i := range 12 {
		b := l.Allow("b.bark.env:1", alerts("PhaseStalled"), stormAt(40*time.Second))
		if want := i < 5; b != want {
			t.Fatalf("b, late alert %d: allowed=%v", i, b)
		}
	}
	// a's window closes at 60 s (first push at 0 s), b's at 60 s too (its
	// first push was at 0 s).
	sums := l.Due(stormAt(time.Minute))
	if len(sums) != 2 {
		t.Fatalf("%d summaries, want one per target: %+v", len(sums), sums)
	}
	if sums[0].Target != "a.bark.env:1" || sums[0].Held != 20 || sums[1].Target != "b.bark.env:1" || sums[1].Held != 7 {
		t.Errorf("summaries %+v", sums)
	}
	if a, b := testutil.ToFloat64(l.held.WithLabelValues("a.bark.env:1")), testutil.ToFloat64(l.held.WithLabelValues("b.bark.env:1")); a != 20 || b != 7 {
		t.Errorf("held a=%g b=%g, want 20 and 7", a, b)
	}
}

// The window slides: a push counts during [t, t+60 s), so the limit holds
// over every 60 s, not per calendar minute, and a steady rate at the limit
// is never held.
func TestStormWindowSlides(t *testing.T) {
	l := mustStorm(t, 3)
	const tg = "t"
	steps := []struct {
		at    time.Duration
		allow bool
	}{
		{0, true}, {20 * time.Second, true}, {40 * time.Second, true},
		{50 * time.Second, false},                 // 3 in [0, 50]
		{60*time.Second - time.Nanosecond, false}, // the 0 s push still counts
		{60 * time.Second, false},                 // its slot is free, but held alerts go first
	}
	for _, s := range steps {
		if got := l.Allow(tg, alerts("A"), stormAt(s.at)); got != s.allow {
			t.Fatalf("at %s allowed=%v, want %v", s.at, got, s.allow)
		}
	}
	sums := l.Due(stormAt(60 * time.Second))
	if len(sums) != 1 || sums[0].Held != 3 {
		t.Fatalf("summary at 60 s: %+v", sums)
	}
	// Window now: 20 s, 40 s, the summary at 60 s: full.
	if l.Allow(tg, alerts("B"), stormAt(61*time.Second)) {
		t.Fatal("allowed at 61 s with pushes at 20, 40 and 60 s")
	}
	if sums := l.Due(stormAt(80*time.Second - time.Nanosecond)); len(sums) != 0 {
		t.Fatalf("summary before 80 s: %+v", sums)
	}
	if sums := l.Due(stormAt(80 * time.Second)); len(sums) != 1 || sums[0].Text != "[lavender-2] 1 more alert in the last minute: B ×1" {
		t.Fatalf("summary at 80 s: %+v", sums)
	}
	// Window: 40, 60, 80 s. At 100 s the 40 s push has left it.
	if l.Allow(tg, alerts("C"), stormAt(99*time.Second)) {
		t.Fatal("allowed at 99 s")
	}
	if sums := l.Due(stormAt(100 * time.Second)); len(sums) != 1 {
		t.Fatalf("summary at 100 s: %+v", sums)
	}
	if !l.Allow(tg, alerts("D"), stormAt(120*time.Second)) || !l.Allow(tg, alerts("D"), stormAt(140*time.Second)) {
		t.Fatal("held after the storm passed")
	}

	// A steady rate at the limit: 3 pushes in every 60 s, never held.
	steady := mustStorm(t, 3)
	for i := range 100 {
		if !steady.Allow(tg, alerts("A"), stormAt(time.Duration(i)*20*time.Second)) {
			t.Fatalf("steady push %d held", i)
		}
	}
}

// In any 60 s a target gets at most max pushes, summaries included,
// whatever the arrival pattern.
func TestStormNeverMoreThanMaxInAnyWindow(t *testing.T) {
	const max = 4
	l := mustStorm(t, max)
	var pushes []time.Time
	heldIn, summarized := 0, 0
	for ms := 0; ms < 10*60*1000; ms += 137 { // bursts and gaps over ten minutes
		now := stormAt(time.Duration(ms) * time.Millisecond)
		for _, s := range l.Due(now) {
			pushes = append(pushes, now)
			summarized += s.Held
		}
		if (ms/5000)%3 == 2 {
			continue // a quiet spell
		}
		if l.Allow("t", alerts("A"), now) {
			pushes = append(pushes, now)
		} else {
			heldIn++
		}
	}
	for _, s := range l.Due(stormAt(time.Hour)) {
		summarized += s.Held
	}
	for i := range pushes {
		n := 0
		for _, p := range pushes[i:] {
			if p.Sub(pushes[i]) < time.Minute {
				n++
			}
		}
		if n > max {
			t.Fatalf("%d pushes in the 60 s from %s", n, pushes[i].Sub(stormT0))
		}
	}
	if heldIn == 0 || summarized != heldIn {
		t.Fatalf("held %d alerts, summaries carried %d", heldIn, summarized)
	}
}

func TestStormBoundedNames(t *testing.T) {
	l := mustStorm(t, 1)
	l.Allow("t", alerts("first"), stormAt(0))
	long := strings.Repeat("VeryLongAlertName", 3) // 54 bytes with its number: kept whole
	for i := range 100 {
		for range i%3 + 1 {
			l.Allow("t", alerts(fmt.Sprintf("%s%03d", long, i)), stormAt(time.Second))
		}
	}
	l.Allow("t", alerts(strings.Repeat("Ü", 100)), stormAt(time.Second)) // 200 bytes: clipped
	sums := l.Due(stormAt(time.Minute))
	if len(sums) != 1 {
		t.Fatalf("summaries %+v", sums)
	}
	s := sums[0]
	if len(s.Counts) != stormMaxNames {
		t.Errorf("%d names kept, want %d", len(s.Counts), stormMaxNames)
	}
	total := s.Others
	for _, c := range s.Counts {
		total += c.Count
		if len(c.Name) > stormMaxNameBytes {
			t.Errorf("name of %d bytes kept", len(c.Name))
		}
	}
	if total != s.Held || s.Held != 200 {
		t.Errorf("counts add up to %d, held %d", total, s.Held)
	}
	if len(s.Text) > bark.MaxMessageBytes {
		t.Errorf("summary text has %d bytes, over %d", len(s.Text), bark.MaxMessageBytes)
	}
	// The text's numbers add up to the total too.
	sum := 0
	for _, part := range strings.Split(s.Text, "×")[1:] {
		var n int
		fmt.Sscanf(part, "%d", &n)
		sum += n
	}
	if sum != s.Held || !strings.Contains(s.Text, ", other alerts ×") {
		t.Errorf("text adds up to %d of %d: %s", sum, s.Held, s.Text)
	}
}

func TestStormBoundedTargets(t *testing.T) {
	l := mustStorm(t, 1)
	for i := range stormMaxTargets {
		l.Allow(fmt.Sprint("t", i), alerts("A"), stormAt(0))
	}
	// Beyond the cap a target is not tracked: its pushes go out.
	for range 3 {
		if !l.Allow("extra", alerts("A"), stormAt(time.Second)) {
			t.Fatal("untracked target held")
		}
	}
	if n := len(l.targets); n != stormMaxTargets {
		t.Fatalf("%d targets tracked, cap %d", n, stormMaxTargets)
	}
	// Once the others' windows are over they are forgotten.
	if !l.Allow("extra", alerts("A"), stormAt(time.Minute)) || l.Allow("extra", alerts("A"), stormAt(time.Minute)) {
		t.Fatal("extra not limited once there was room")
	}
	if n := len(l.targets); n != 1 {
		t.Fatalf("%d targets tracked after the idle ones left", n)
	}
	if sums := l.Due(stormAt(2 * time.Minute)); len(sums) != 1 {
		t.Fatalf("summaries for extra: %+v", sums)
	}
	l.Due(stormAt(3 * time.Minute))
	if n := len(l.targets); n != 0 {
		t.Fatalf("%d targets tracked when all are idle", n)
	}
}

func TestStormOffAndBadSettings(t *testing.T) {
	l := mustStorm(t, 0)
	for i := range 1000 {
		if !l.Allow("t", alerts("A"), stormAt(time.Duration(i)*time.Millisecond)) {
			t.Fatal("storm control off, but a push was held")
		}
	}
	if len(l.Due(stormAt(time.Hour))) != 0 {
		t.Fatal("summary with storm control off")
	}
	var nilLimiter *stormLimiter
	if !nilLimiter.Allow("t", alerts("A"), stormAt(0)) || nilLimiter.Due(stormAt(0)) != nil {
		t.Fatal("a nil limiter must allow everything")
	}
	for _, bad := range []int{-1, MaxMaxPerMinute + 1} {
		if _, err := newStormLimiter(bad, "[x]"); err == nil || !strings.Contains(err.Error(), "max pushes per minute") {
			t.Errorf("newStormLimiter(%d): %v", bad, err)
		}
		if _, err := New(Config{ConfigDir: t.TempDir(), MaxPerMinute: bad}, nil, nil); err == nil || !strings.Contains(err.Error(), "MaxPerMinute must be in [0, 1000]") {
			t.Errorf("New with MaxPerMinute %d: %v", bad, err)
		}
	}
}

func TestStormTrackTargets(t *testing.T) {
	l := mustStorm(t, 1)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(l.Collector()); err != nil {
		t.Fatal(err)
	}
	l.trackTargets(stormKeys{}, unnamedKeys("a:1", "b:1"))
	if n := testutil.CollectAndCount(l.Collector(), HeldPushesMetric); n != 2 {
		t.Fatalf("%d series before any push, want 2 at zero", n)
	}
	l.Allow("b:1", alerts("A"), stormAt(0))
	l.Allow("b:1", alerts("A"), stormAt(time.Second))             // held
	l.trackTargets(unnamedKeys("a:1", "b:1"), unnamedKeys("a:1")) // a reload removed b
	if n := testutil.CollectAndCount(l.Collector(), HeldPushesMetric); n != 1 {
		t.Errorf("%d series after b left, want 1", n)
	}
	if sums := l.Due(stormAt(time.Minute)); len(sums) != 0 {
		t.Errorf("summary for a removed target: %+v", sums)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// runStorm runs l.run with a 1 ms tick and clock until stop (which may be
// called again), which returns once run has; the summaries run sends
// arrive on the channel.
func runStorm(l *stormLimiter, clock func() time.Time) (<-chan stormSummary, func()) {
	got := make(chan stormSummary, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run(ctx, time.Millisecond, clock, func(s stormSummary) { got <- s })
	}()
	var once sync.Once
	return got, func() { once.Do(func() { cancel(); <-done }) }
}

// TestStormRunSendsSummaries: run sends a held alert's summary once it
// is due, and only that one. It reads the clock (and so wakes) only while
// alerts are held, so an idle serve has no timer firing every tick; a held
// alert wakes it, and once its summary is out it sleeps again.
func TestStormRunSendsSummaries(t *testing.T) {
	l := mustStorm(t, 1)
	var (
		mu    sync.Mutex
		now   = stormAt(0)
		reads int
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); reads++; return now }
	readsSoFar := func() int { mu.Lock(); defer mu.Unlock(); return reads }
	got, stop := runStorm(l, clock)
	defer stop()

	// 50 ticks' time with nothing held, then one push allowed: no tick.
	time.Sleep(50 * time.Millisecond)
	l.Allow("t", alerts("A"), stormAt(0))
	time.Sleep(50 * time.Millisecond)
	if n := readsSoFar(); n != 0 {
		t.Fatalf("run read the clock %d times with nothing held", n)
	}

	l.Allow("t", alerts("B"), stormAt(time.Second)) // held: run ticks until it is due
	mu.Lock()
	now = stormAt(time.Minute)
	mu.Unlock()
	select {
	case s := <-got:
		if s.Text != "[lavender-2] 1 more alert in the last minute: B ×1" {
			t.Errorf("sent %+v", s)
		}
	case <-time.After(30 * time.Second): // a guard against hanging, not a speed check
		t.Fatal("run sent no summary for the held alert")
	}
	after := readsSoFar()
	if after == 0 {
		t.Fatal("run sent a summary without reading the clock")
	}
	time.Sleep(50 * time.Millisecond)
	if n := readsSoFar(); n != after {
		t.Errorf("run read the clock %d more times after the summary, with nothing held", n-after)
	}
	stop()
	if len(got) != 0 {
		t.Errorf("more summaries: %+v", <-got)
	}
}

func TestSummaryName(t *testing.T) {
	for in, want := range map[string]string{
		"SwapUsageHigh":              "SwapUsageHigh",
		"  Swap\r\nUsage\u2028High ": "Swap Usage High",
		"":                           "",
		"\x00\x1b":                   "",
		"Swap\u202eHigh\u200b":       "SwapHigh",
		"bad\xffutf8":                "bad\uFFFDutf8",
		strings.Repeat("Ü", 100):     strings.Repeat("Ü", 30) + "…",
	} {
		got := summaryName(in)
		if got != want {
			t.Errorf("summaryName(%q) = %q, want %q", in, got, want)
		}
		if len(got) > stormMaxNameBytes {
			t.Errorf("summaryName(%q) has %d bytes", in, len(got))
		}
	}
}

// alerts are the storm events of one push of Alertmanager alerts by name.
func alerts(names ...string) []StormEvent {
	out := make([]StormEvent, len(names))
	for i, n := range names {
		out[i] = AlertEvent(n, false)
	}
	return out
}

// TestStormSummaryNamesCannotFakeItsCounts: whatever an alert is named, the
// summary's own structure (", " between items, " ×N" after each, the
// "other alerts" fold) stays the summary's: a name that is not one word of
// letters, digits and _ : . - is quoted, its quotes and × signs replaced.
func TestStormSummaryNamesCannotFakeItsCounts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		held  []StormEvent
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
		{"a name posing as a watchdog event", append(alerts("phase stalled"), WordedEvent("phase stalled", false)),
			`2 more alerts in the last minute: "phase stalled" ×1, phase stalled ×1`, 2},
		{"a right-to-left override", alerts("Swap\u202e05× hgiH"),
			`1 more alert in the last minute: "Swap05x hgiH" ×1`, 1},
		{"a cut name is quoted and marked", alerts(strings.Repeat("A", 100)),
			`1 more alert in the last minute: "` + strings.Repeat("A", stormMaxNameBytes-len("…")) + `…" ×1`, 1},
		{"unnamed and resolved", []StormEvent{AlertEvent("", false), AlertEvent("DiskFull", true), AlertEvent("Disk full", true)},
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
				if l.Allow("t", []StormEvent{e}, stormAt(time.Second)) {
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
