package watchpush

import (
	"slices"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/ntfytest"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/watchdog"
)

// TestBarkAndNtfyCarryTheSameWords: every kind of watchdog push, firing and
// resolved, reaches a Bark and an ntfy target of one pipeline with the same
// text; ntfy gets the push's priority, its kind's tags and the incident's
// sequence id.
func TestBarkAndNtfyCarryTheSameWords(t *testing.T) {
	var alerts [][]watchdog.Alert
	for _, event := range pushtext.Events {
		at := pushedAt.Add(time.Minute)
		alerts = append(alerts,
			[]watchdog.Alert{{Rule: event, Status: watchdog.Firing, Began: pushedAt, At: at, Phase: "Pretrain 1/3", Incident: "Pretrain 1/3"}},
			[]watchdog.Alert{{Rule: event, Status: watchdog.Resolved, Began: pushedAt, At: at.Add(time.Hour), Phase: "Pretrain 1/3", Incident: "Pretrain 1/3"}})
	}
	alerts = append(alerts,
		[]watchdog.Alert{swapAlert(0.54, giBytes(16.3), 32*bytesPerGiB)},
		[]watchdog.Alert{oomAlert(1, watchdog.Victim{PID: 4242, Name: "python3 ✨ «ü»", Seq: 1}, "", swapOf(giBytes(1.1), 2*bytesPerGiB))},
		[]watchdog.Alert{endedPhaseAlert(watchdog.RuleFailed, "Finetune 🦙", time.Hour), silentPhaseAlert("eval", 20*time.Minute)},
	)
	for _, poll := range alerts {
		name := string(poll[0].Rule) + " " + string(poll[0].Status)
		t.Run(name, func(t *testing.T) {
			bark, ntfy := barktest.New(t, "KEY"), ntfytest.New(t)
			f := newFixture(t, map[string]string{
				"phone.bark.env": bark.Template("KEY"),
				"phone.ntfy.env": ntfy.TopicURL("lavender-test") + "\n",
			}, func(c *fixtureConfig) { c.Hostname = "gpu-3"; c.Levels = Levels{poll[0].Rule: "timeSensitive"} })
			if ok, failed := f.pusher.Push(t.Context(), poll); ok != 2 || failed != 0 {
				t.Fatalf("Push = %d, %d, want both targets", ok, failed)
			}
			b, n := bark.Pushes(), ntfy.Publishes()
			if len(b) != 1 || len(n) != 1 {
				t.Fatalf("%d Bark pushes and %d ntfy publishes, want one each", len(b), len(n))
			}
			if b[0].Body != n[0].Message || n[0].Message == "" {
				t.Errorf("the channels got different words:\n Bark %q\n ntfy %q", b[0].Body, n[0].Message)
			}
			wantPriority := 4 // timeSensitive
			if poll[0].Status == watchdog.Resolved {
				wantPriority = 2 // a resolution stays passive
			}
			if n[0].Priority != wantPriority {
				t.Errorf("ntfy priority %d, want %d", n[0].Priority, wantPriority)
			}
			if want := pushtext.Tags(poll[0].Rule, poll[0].Status == watchdog.Resolved); !slices.Equal(n[0].Tags[:len(want)], want) {
				t.Errorf("ntfy tags %q, want them to start %q", n[0].Tags, want)
			}
			if b[0].ID == "" || n[0].SentSequenceID != b[0].ID {
				t.Errorf("ntfy sequence id %q, Bark id %q: one incident, one id", n[0].SentSequenceID, b[0].ID)
			}
		})
	}
}
