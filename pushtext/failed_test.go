package pushtext

import (
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
