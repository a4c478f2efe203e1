package pushtext

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/watchdog"
)

// A failed push says why: the end's reason, a death without an end, or a
// count of failures in a window.
func TestFailedTexts(t *testing.T) {
	at := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	ran := 2*time.Hour + 13*time.Minute
	end := func(reason string, died bool) phaseapi.PhaseEnd {
		return phaseapi.PhaseEnd{Seq: 7, Phase: "Finetune", Status: phaseapi.StatusFailed, Reason: reason, Started: at.Add(-ran), Ended: at, Died: died, PID: 4242}
	}
	for _, tc := range []struct {
		name string
		a    watchdog.Alert
		want string
	}{
		{"with a reason", watchdog.Alert{End: end("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", false), Ends: 1},
			`phase "Finetune" failed after 2h13m: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB`},
		{"without one", watchdog.Alert{End: end("", false), Ends: 1}, `phase "Finetune" failed after 2h13m`},
		{"a reason on lines, with a bidi override", watchdog.Alert{End: end("killed by\nSIGKILL \u202e", false), Ends: 1},
			`phase "Finetune" failed after 2h13m: killed by SIGKILL`},
		{"died", watchdog.Alert{End: end("died without ending (pid 4242 gone)", true), Ends: 1},
			`phase "Finetune" died without ending after 2h13m (pid 4242 gone)`},
		{"counted", watchdog.Alert{End: end("RuntimeError: three", false), Ends: 3, Began: at.Add(-10 * time.Minute)},
			`phase "Finetune" failed 3 times in 10m: RuntimeError: three`},
	} {
		tc.a.Rule, tc.a.Status, tc.a.Phase = watchdog.RuleFailed, watchdog.Firing, "Finetune"
		if tc.a.At.IsZero() {
			tc.a.At = at
		}
		got := Alert(tc.a)
		if got.Body != tc.want || got.Subject != "failed Finetune" {
			t.Errorf("%s: %q (%q), want %q", tc.name, got.Body, got.Subject, tc.want)
		}
		if strings.ContainsRune(got.Body, '\u202e') {
			t.Errorf("%s: a bidi override reached the push", tc.name)
		}
	}
}

// TestUnwatchedEndIsNotWordedAsAFailure: a phase whose process ended
// while lavender was down, with no end after, is pushed as over, how it
// ended unknown: neither "failed" nor "died", in the text or the subject.
func TestUnwatchedEndIsNotWordedAsAFailure(t *testing.T) {
	at := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	end := phaseapi.PhaseEnd{Seq: 7, Phase: "Train", Status: phaseapi.StatusUnknown, Reason: "ended while lavender was down, its end never arrived (pid 27795 gone)",
		Started: at.Add(-2 * time.Hour), Ended: at, Died: true, PID: 27795}
	got := Alert(watchdog.Alert{Rule: watchdog.RuleFailed, Status: watchdog.Firing, Phase: "Train", At: at, End: end, Ends: 1})
	if want := `phase "Train" ended while lavender was down, its end never arrived (pid 27795 gone)`; got.Body != want || got.Subject != "ended Train" {
		t.Errorf("%q (%q), want %q (%q)", got.Body, got.Subject, want, "ended Train")
	}
}

// TestDonePushSaysALossThatDiverged: a phase that ends ok with a NaN or
// infinite loss diverged; the loss rule pushed it, and the done push that
// follows must not read as a good run. A finite loss, or none, changes
// nothing.
func TestDonePushSaysALossThatDiverged(t *testing.T) {
	loss := func(f float64) *phaseapi.Loss { l := phaseapi.Loss(f); return &l }
	started := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		loss *phaseapi.Loss
		want string
	}{
		{nil, `phase "Finetune" done in 4h12m`},
		{loss(0.75), `phase "Finetune" done in 4h12m`},
		{loss(math.NaN()), `phase "Finetune" done in 4h12m, but its loss is NaN — training diverged`},
		{loss(math.Inf(1)), `phase "Finetune" done in 4h12m, but its loss is +Inf — training diverged`},
	} {
		end := phaseapi.PhaseEnd{Seq: 1, Phase: "Finetune", Status: phaseapi.StatusOK, Started: started,
			Ended: started.Add(4*time.Hour + 12*time.Minute), Loss: tc.loss}
		a := watchdog.Alert{Rule: watchdog.RuleDone, Status: watchdog.Firing, Incident: "Finetune", Phase: "Finetune", End: end, Began: end.Ended, At: end.Ended}
		if got := Alert(a).Body; got != tc.want {
			t.Errorf("loss %v: %q, want %q", tc.loss, got, tc.want)
		}
	}
}
