package watchpush

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/watchdog"
)

var pushedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func swapOf(used, total uint64) watchdog.Swap {
	s := watchdog.Swap{UsedBytes: used, TotalBytes: total}
	if total > 0 {
		s.Ratio = float64(used) / float64(total)
	}
	return s
}

// swapAlert is the swap rule's firing alert at ratio, with byte figures.
func swapAlert(ratio float64, used, total uint64) watchdog.Alert {
	return watchdog.Alert{Rule: watchdog.RuleSwap, Status: watchdog.Firing, Began: pushedAt, At: pushedAt,
		Sample: watchdog.Sample{Swap: watchdog.Swap{Ratio: ratio, UsedBytes: used, TotalBytes: total}}}
}

func pressureAlert(some float64, swap watchdog.Swap) watchdog.Alert {
	return watchdog.Alert{Rule: watchdog.RulePressure, Status: watchdog.Firing, Began: pushedAt, At: pushedAt,
		Sample: watchdog.Sample{Swap: swap, Pressure: watchdog.Pressure{Available: true, Some: some, Full: some}}}
}

func oomAlert(kills uint64, victim watchdog.Victim, phase string, swap watchdog.Swap) watchdog.Alert {
	return watchdog.Alert{Rule: watchdog.RuleOOM, Status: watchdog.Firing, Began: pushedAt, At: pushedAt, Kills: kills, Victim: victim, Phase: phase,
		Sample: watchdog.Sample{Swap: swap, OOM: watchdog.OOM{Available: true, Kills: 7, Victim: victim}}}
}

// TestPushTexts covers every watchdog text, through the real sender, a
// Bark-compatible server and the run log: one push and one BARK line per
// call, whatever the number of alerts it carries.
func TestPushTexts(t *testing.T) {
	halfGiB, twoGiB := uint64(bytesPerGiB/2+bytesPerGiB/50), uint64(2*bytesPerGiB) // 26 % of 2 GiB
	oomSwap := swapOf(giBytes(1.12), twoGiB)
	python := watchdog.Victim{PID: 4242, Name: "python3", Seq: 991}
	pythonOf := python
	pythonOf.Owner, pythonOf.Phase = watchdog.VictimOfPhase, "Pretrain 1/3"
	tests := []struct {
		name   string
		alerts []watchdog.Alert
		body   string
		line   string
	}{
		{"swap", []watchdog.Alert{swapAlert(0.54, giBytes(16.3), 32*bytesPerGiB)},
			"[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening",
			"BARK swap 54% sent ok=1 fail=0"},
		{"pressure", []watchdog.Alert{pressureAlert(0.23, swapOf(halfGiB, twoGiB))},
			"[lavender-2] memory pressure 23% (last 10s), swap 26% full (0.5/2.0 GB) — consider intervening",
			"BARK pressure 23% sent ok=1 fail=0"},
		{"pressure without swap", []watchdog.Alert{pressureAlert(0.23, watchdog.Swap{})},
			"[lavender-2] memory pressure 23% (last 10s), no swap — consider intervening",
			"BARK pressure 23% sent ok=1 fail=0"},
		{"oom while a phase runs, victim unknown: the phase is not blamed", []watchdog.Alert{oomAlert(1, watchdog.Victim{}, "Pretrain 1/3", oomSwap)},
			`[lavender-2] OOM killer struck (1 kill), victim unknown — swap 56% full (1.1/2.0 GB)`,
			"BARK oom 1 kill sent ok=1 fail=0"},
		{"oom without a phase, two kills", []watchdog.Alert{oomAlert(2, watchdog.Victim{}, "", oomSwap)},
			"[lavender-2] OOM killer struck (2 kills), victim unknown — swap 56% full (1.1/2.0 GB)",
			"BARK oom 2 kills sent ok=1 fail=0"},
		{"oom with its victim, a phase's process", []watchdog.Alert{oomAlert(1, pythonOf, "Pretrain 1/3", oomSwap)},
			`[lavender-2] OOM killer struck python3 (pid 4242) of phase "Pretrain 1/3" — swap 56% full (1.1/2.0 GB)`,
			"BARK oom 1 kill sent ok=1 fail=0"},
		{"oom with its victim among three kills, no swap", []watchdog.Alert{oomAlert(3, python, "", watchdog.Swap{})},
			"[lavender-2] OOM killer struck python3 (pid 4242), and 2 more — no swap",
			"BARK oom 3 kills sent ok=1 fail=0"},
		{"a victim name with controls stays on one line", []watchdog.Alert{oomAlert(1, watchdog.Victim{PID: 7, Name: "a\nb\u202e"}, "", oomSwap)},
			"[lavender-2] OOM killer struck a b (pid 7) — swap 56% full (1.1/2.0 GB)",
			"BARK oom 1 kill sent ok=1 fail=0"},
		{"three rules in one poll", []watchdog.Alert{
			swapAlert(0.56, giBytes(1.12), twoGiB),
			pressureAlert(0.23, oomSwap),
			oomAlert(1, pythonOf, "Pretrain 1/3", oomSwap),
		},
			"[lavender-2] swap 56% full (1.1/2.0 GB) — consider intervening; " +
				"memory pressure 23% (last 10s), swap 56% full (1.1/2.0 GB) — consider intervening; " +
				`OOM killer struck python3 (pid 4242) of phase "Pretrain 1/3" — swap 56% full (1.1/2.0 GB)`,
			"BARK swap 56% + pressure 23% + oom 1 kill sent ok=1 fail=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := barktest.New(t, "KEY")
			f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, nil)
			ok, failed := f.pusher.Push(t.Context(), tt.alerts)
			if ok != 1 || failed != 0 {
				t.Errorf("Push = %d, %d, want 1, 0", ok, failed)
			}
			got := srv.Pushes()
			if len(got) != 1 || got[0].Body != tt.body {
				t.Fatalf("pushed %+v\nwant one push of %q", got, tt.body)
			}
			if lines := f.barkLines(); len(lines) != 1 || lines[0] != tt.line {
				t.Errorf("run log %q, want [%q]", lines, tt.line)
			}
		})
	}
}

// TestPushLineKeepsItsTail: however many kills and rules, the BARK line
// stays under runlog's line cap with "sent ok= fail=" whole.
func TestPushLineKeepsItsTail(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, nil)
	f.pusher.Push(t.Context(), []watchdog.Alert{
		swapAlert(1, 32*bytesPerGiB, 32*bytesPerGiB),
		pressureAlert(1, swapOf(1, 2)),
		oomAlert(1<<60, watchdog.Victim{}, "", watchdog.Swap{}),
		{Rule: "some-future-rule-with-a-long-name", Status: watchdog.Firing},
	})
	lines := f.barkLines()
	if len(lines) != 1 || !strings.HasSuffix(lines[0], " sent ok=1 fail=0") || len("15:04:05 "+lines[0]) > 80 {
		t.Errorf("run log %q", lines)
	}
	if got := srv.Pushes(); len(got) != 1 || !strings.HasSuffix(got[0].Body, "; some-future-rule-with-a-long-name firing") {
		t.Errorf("a rule without a text of its own must still reach the phone: %+v", got)
	}
}

// TestPushResolutionReplacesTheFiringPush: the watchdog's resolution is
// pushed with the firing push's id, so it replaces it on the phone, says
// how long the incident lasted, and groups by the host; another incident
// of the same rule gets another id.
func TestPushResolutionReplacesTheFiringPush(t *testing.T) {
	srv := barktest.New(t)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) { c.Hostname = "gpu-3" })
	firing := swapAlert(0.54, giBytes(16.3), 32*bytesPerGiB)
	reminder := firing
	reminder.At = firing.Began.Add(30 * time.Minute)
	resolved := swapAlert(0.31, giBytes(9.9), 32*bytesPerGiB)
	resolved.Status, resolved.At = watchdog.Resolved, firing.Began.Add(42*time.Minute)
	next := firing
	next.Began = firing.Began.Add(time.Hour)
	for _, a := range []watchdog.Alert{firing, reminder, resolved, next} {
		if ok, failed := f.pusher.Push(t.Context(), []watchdog.Alert{a}); ok != 1 || failed != 0 {
			t.Fatalf("Push(%s) = %d, %d", a.Status, ok, failed)
		}
	}
	got := srv.Pushes()
	if len(got) != 4 {
		t.Fatalf("%d pushes, want 4", len(got))
	}
	if got[2].Body != "[lavender-2] resolved: swap 31% full (9.9/32.0 GB) after 42m" {
		t.Errorf("resolved body %q", got[2].Body)
	}
	if got[0].ID == "" || got[1].ID != got[0].ID || got[2].ID != got[0].ID {
		t.Errorf("ids %q %q %q: firing, reminder and resolution must share one", got[0].ID, got[1].ID, got[2].ID)
	}
	if got[3].ID == got[0].ID {
		t.Errorf("a new incident reused id %q", got[0].ID)
	}
	for _, p := range got {
		if p.Group != "gpu-3" {
			t.Errorf("group %q, want the host name", p.Group)
		}
	}
	if lines := f.barkLines(); len(lines) != 4 || lines[2] != "BARK resolved swap 31% sent ok=1 fail=0" {
		t.Errorf("run log %q", lines)
	}
}

// TestWatchdogIncidentIDs: the id of a watchdog push follows the incident
// the watchdog tells apart: each stalled phase has its own notification,
// kept through its reminders, while the OOM rule's pushes are one incident
// whatever phase ran.
func TestWatchdogIncidentIDs(t *testing.T) {
	rules, err := watchdog.NewPhaseRules(watchdog.PhaseConfig{Notify: []string{string(watchdog.RuleStalled)}, StallAfter: 10 * time.Minute, Repeat: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	stall := rules[0]
	silent := func(name string) phaseapi.Phase {
		return phaseapi.Phase{Name: name, Status: phaseapi.StatusActive, Started: pushedAt, LastHeartbeat: pushedAt}
	}
	poll := func(after time.Duration) []watchdog.Alert {
		now := pushedAt.Add(after)
		alerts := stall.Observe(watchdog.Sample{Time: now, Phases: []phaseapi.Phase{silent("A"), silent("B")}}, now)
		for _, a := range alerts {
			stall.Pushed(a, true, now)
		}
		return alerts
	}
	id := func(a watchdog.Alert) string { return IncidentID(incidentRule(a), a.Began, "gpu-7") }
	first, reminder := poll(10*time.Minute), poll(20*time.Minute)
	if len(first) != 2 || len(reminder) != 2 {
		t.Fatalf("stalls %d, reminders %d, want 2 of each", len(first), len(reminder))
	}
	if id(first[0]) == id(first[1]) {
		t.Errorf("two phases stalled at once share the id %q", id(first[0]))
	}
	for i := range first {
		if id(reminder[i]) != id(first[i]) {
			t.Errorf("%s: reminder id %q, want the stall's %q", first[i].Phase, id(reminder[i]), id(first[i]))
		}
	}
	disk, err := watchdog.NewDiskRule(watchdog.DiskConfig{MinFree: watchdog.MinFree{Ratio: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	short := watchdog.Disk{Path: "/data", SizeBytes: 64 << 20, AvailBytes: 1 << 20, SaveBytes: 24 << 20}
	conditions := disk.Observe(watchdog.Sample{Disks: []watchdog.Disk{short}}, pushedAt)
	if len(conditions) != 2 {
		t.Fatalf("the save and the floor of one disk: %d pushes, want 2", len(conditions))
	}
	if id(conditions[0]) == id(conditions[1]) {
		t.Errorf("the save and the floor of one disk share the id %q", id(conditions[0]))
	}
	oom := oomAlert(1, watchdog.Victim{}, "", watchdog.Swap{})
	inPhase := oomAlert(1, watchdog.Victim{}, pretrain, watchdog.Swap{})
	if id(oom) != id(inPhase) {
		t.Errorf("an OOM push's id depends on the phase that ran: %q, %q", id(oom), id(inPhase))
	}
}

// TestResolutionsReplaceTheirNotifications: phases stalled in one poll
// share one notification, and their resolutions replace it, whether they
// end in one poll or the last of them ends later (the earlier ones get a
// push of their own, which leaves the shared notification alone while it
// still shows a stalled phase); phases stalled in separate polls each have
// their notification, and one poll resolving them both replaces each.
func TestResolutionsReplaceTheirNotifications(t *testing.T) {
	srv := barktest.New(t)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) { c.Hostname = "gpu-3" })
	stalled := func(name string) watchdog.Alert { return silentPhaseAlert(name, 20*time.Minute) }
	over := func(a watchdog.Alert) watchdog.Alert {
		a.Status, a.At = watchdog.Resolved, a.At.Add(time.Hour)
		return a
	}
	a, b, c, d := stalled("A"), stalled("B"), stalled("C"), stalled("D")
	polls := [][]watchdog.Alert{
		{a, b},             // 0: one notification for A and B
		{over(a), over(b)}, // 1: replaces it
		{c},                // 2: C's own
		{d},                // 3: D's own
		{over(c), over(d)}, // 4: replaces C's, then D's
	}
	for i, poll := range polls {
		want := 1
		if i == 4 {
			want = 2 // two pushes, one target each
		}
		if ok, failed := f.pusher.Push(t.Context(), poll); ok != want || failed != 0 {
			t.Fatalf("poll %d: Push = %d, %d, want %d, 0", i, ok, failed, want)
		}
	}
	got := srv.Pushes()
	if len(got) != 6 {
		t.Fatalf("%d pushes, want 6 (poll 4 splits in two)", len(got))
	}
	ids := make([]string, len(got))
	for i, p := range got {
		ids[i] = p.ID
	}
	if ids[0] == "" || ids[1] != ids[0] {
		t.Errorf("A and B's resolution %q does not replace their notification %q", ids[1], ids[0])
	}
	if ids[2] == ids[3] || ids[4] != ids[2] || ids[5] != ids[3] {
		t.Errorf("ids %q: want C's and D's resolutions to replace their own notifications", ids)
	}
	if !strings.Contains(got[4].Body, `"C"`) || strings.Contains(got[4].Body, `"D"`) {
		t.Errorf("C's resolution reads %q", got[4].Body)
	}
}

// TestResolutionKeepsAStillStalledPhaseInView: when one of two phases
// shown together ends, its resolution is a notification of its own: the
// shared one still shows the other phase, which has not ended.
func TestResolutionKeepsAStillStalledPhaseInView(t *testing.T) {
	srv := barktest.New(t)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, nil)
	a, b := silentPhaseAlert("A", 20*time.Minute), silentPhaseAlert("B", 20*time.Minute)
	endA := a
	endA.Status, endA.At = watchdog.Resolved, a.At.Add(time.Hour)
	f.pusher.Push(t.Context(), []watchdog.Alert{a, b})
	f.pusher.Push(t.Context(), []watchdog.Alert{endA})
	if got := srv.Pushes(); len(got) != 2 || got[1].ID == got[0].ID {
		t.Errorf("pushes %+v: A's end must not replace the notification that still shows B", got)
	}
}

// resolvedLater is a's resolution an hour on.
func resolvedLater(a watchdog.Alert) watchdog.Alert {
	a.Status, a.At = watchdog.Resolved, a.At.Add(time.Hour)
	return a
}

// twoNotifications is a pusher without retries, whose phone shows two
// notifications: N1 of stalled phases A and B, N2 of C and D.
func twoNotifications(t *testing.T) (srv *barktest.Server, f *fixture, a, b, c, d watchdog.Alert) {
	t.Helper()
	srv = barktest.New(t)
	f = newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) { c.Retry = delivery.Retry{Off: true} })
	stalled := func(name string) watchdog.Alert { return silentPhaseAlert(name, 20*time.Minute) }
	a, b, c, d = stalled("A"), stalled("B"), stalled("C"), stalled("D")
	f.pusher.Push(t.Context(), []watchdog.Alert{a, b}) // N1
	f.pusher.Push(t.Context(), []watchdog.Alert{c, d}) // N2
	return srv, f, a, b, c, d
}

// TestResolutionsGoOutWhenAnotherNotificationsFails: one poll ends the
// incidents of two notifications; the first one's push fails, and the
// second still replaces its own: the watchdog never retries a resolution,
// so a push left out would leave its notification showing stalled phases
// for ever. Push counts both outcomes.
func TestResolutionsGoOutWhenAnotherNotificationsFails(t *testing.T) {
	srv, f, a, b, c, d := twoNotifications(t)
	srv.SetFault(barktest.FailFirst(1, barktest.Status(http.StatusServiceUnavailable, "push failed")))
	ok, failed := f.pusher.Push(t.Context(), []watchdog.Alert{resolvedLater(a), resolvedLater(b), resolvedLater(c), resolvedLater(d)})
	if ok != 1 || failed != 1 {
		t.Errorf("Push = %d, %d, want 1, 1 (N1's resolution failed, N2's went out)", ok, failed)
	}
	got := srv.Pushes()
	if len(got) != 4 {
		t.Fatalf("%d pushes, want 4 (N1, N2, then a resolution for each)", len(got))
	}
	if got[2].ID != got[0].ID || got[3].ID != got[1].ID || got[3].Status != http.StatusOK {
		t.Errorf("resolutions %q (HTTP %d), %q (HTTP %d): want N1's %q, then N2's %q accepted",
			got[2].ID, got[2].Status, got[3].ID, got[3].Status, got[0].ID, got[1].ID)
	}
}

// TestRetriedResolutionReplacesTheNotificationItFailedToReplace: a
// notification is forgotten only once its resolution reached a phone, so
// that resending the resolutions of a poll whose push partly failed
// replaces the notification still showing them, rather than adding one
// with an id of its own.
func TestRetriedResolutionReplacesTheNotificationItFailedToReplace(t *testing.T) {
	srv, f, a, b, c, d := twoNotifications(t)
	n1, n2 := srv.Pushes()[0].ID, srv.Pushes()[1].ID
	// C and D first: N2's push is the one that fails.
	poll := []watchdog.Alert{resolvedLater(c), resolvedLater(d), resolvedLater(a), resolvedLater(b)}
	srv.SetFault(barktest.FailFirst(1, barktest.Status(http.StatusServiceUnavailable, "push failed")))
	f.pusher.Push(t.Context(), poll)
	f.pusher.Push(t.Context(), poll)
	replaced := false
	for _, p := range srv.Accepted()[2:] {
		if p.ID != n1 && p.ID != n2 {
			t.Errorf("a resolution went out as %q: each must replace N1 (%q) or N2 (%q)", p.ID, n1, n2)
		}
		replaced = replaced || p.ID == n2 && strings.Contains(p.Body, `"C"`) && strings.Contains(p.Body, `"D"`)
	}
	if !replaced {
		t.Errorf("no resolution of C and D replaced N2 (%q)", n2)
	}
}

// TestLastResolutionReplacesTheSharedNotification: phases stalled in one
// poll share a notification; the first to end gets a push of its own,
// and the last to end, in a later poll, replaces the shared one, which
// otherwise would say for ever that both are stalled. Its text is that
// phase's resolution alone: the other's is on the phone already. With
// DeleteOnResolve, the last one deletes the shared notification.
func TestLastResolutionReplacesTheSharedNotification(t *testing.T) {
	for _, del := range []bool{false, true} {
		t.Run(fmt.Sprintf("DeleteOnResolve=%t", del), func(t *testing.T) {
			srv := barktest.New(t)
			f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) { c.DeleteOnResolve = del })
			a, b, c := silentPhaseAlert("A", 20*time.Minute), silentPhaseAlert("B", 20*time.Minute), silentPhaseAlert("C", 20*time.Minute)
			for i, poll := range [][]watchdog.Alert{{a, b, c}, {resolvedLater(a)}, {resolvedLater(b)}, {resolvedLater(c)}} {
				if ok, failed := f.pusher.Push(t.Context(), poll); ok != 1 || failed != 0 {
					t.Fatalf("poll %d: Push = %d, %d, want 1, 0", i, ok, failed)
				}
			}
			got := srv.Pushes()
			if len(got) != 4 {
				t.Fatalf("%d pushes, want 4", len(got))
			}
			n := got[0].ID
			if got[1].ID == n || got[2].ID == n {
				t.Errorf("ids %q, %q: A's and B's ends must leave the notification that still shows C alone", got[1].ID, got[2].ID)
			}
			last := got[3]
			if last.ID != n {
				t.Fatalf("C's resolution, the last of the three, went out as %q, not as their notification %q", last.ID, n)
			}
			if del {
				if last.Delete != "1" {
					t.Errorf("C's resolution does not delete their notification: delete=%q", last.Delete)
				}
				return
			}
			if !strings.Contains(last.Body, `resolved: phase "C"`) || strings.Contains(last.Body, `"A"`) || strings.Contains(last.Body, `"B"`) {
				t.Errorf("their notification now reads %q: want C's resolution alone", last.Body)
			}
		})
	}
}

// TestReminderApartLeavesTheSharedNotification: a reminder pushed on its
// own moves its incident to a notification of its own; the one it shared
// then shows only the others, so the last of them to end replaces it, and
// the moved incident's end replaces the reminder's notification.
func TestReminderApartLeavesTheSharedNotification(t *testing.T) {
	srv := barktest.New(t)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, nil)
	a, b := silentPhaseAlert("A", 20*time.Minute), silentPhaseAlert("B", 20*time.Minute)
	remindA := a
	remindA.Status, remindA.At = watchdog.Reminder, a.At.Add(30*time.Minute)
	for i, poll := range [][]watchdog.Alert{{a, b}, {remindA}, {resolvedLater(b)}, {resolvedLater(a)}} {
		if ok, failed := f.pusher.Push(t.Context(), poll); ok != 1 || failed != 0 {
			t.Fatalf("poll %d: Push = %d, %d, want 1, 0", i, ok, failed)
		}
	}
	got := srv.Pushes()
	if len(got) != 4 {
		t.Fatalf("%d pushes, want 4", len(got))
	}
	shared, own := got[0].ID, got[1].ID
	if own == shared {
		t.Fatalf("A's reminder went out as the shared notification %q", shared)
	}
	if got[2].ID != shared {
		t.Errorf("B's resolution went out as %q, not as the notification it shared with A, %q (A's reminder moved A away)", got[2].ID, shared)
	}
	if got[3].ID != own {
		t.Errorf("A's resolution went out as %q, not as its reminder's notification %q", got[3].ID, own)
	}
}
