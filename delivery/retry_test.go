package delivery

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/notify"
)

// scriptedNotifier answers its tries from a script, then accepts.
type scriptedNotifier struct {
	mu      sync.Mutex
	answers []*notify.Error // one per try; past the end: accepted
	tries   int
}

func (n *scriptedNotifier) Name() string     { return "scripted:1" }
func (n *scriptedNotifier) Channel() string  { return "test" }
func (n *scriptedNotifier) Identity() string { return "scripted" }
func (n *scriptedNotifier) Phone() string    { return "" }

func (n *scriptedNotifier) Notify(ctx context.Context, _ notify.Message) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.tries++
	if n.tries > len(n.answers) {
		return false, nil
	}
	e := n.answers[n.tries-1]
	return e.Retryable, e
}

// TestRetryStage: which failures are tried again, how often, and within
// what time.
func TestRetryStage(t *testing.T) {
	var (
		http500  = &notify.Error{Class: "HTTP 500", Retryable: true}
		http429  = &notify.Error{Class: "HTTP 429", Retryable: true}
		http400  = &notify.Error{Class: "HTTP 400"}
		refused  = &notify.Error{Class: "connection refused", Retryable: true, Unreachable: true}
		fast     = Retry{First: time.Millisecond, Max: 4 * time.Millisecond, Tries: 4}
		relaxed  = 10 * time.Second
		tinyTime = 30 * time.Millisecond
	)
	for _, tc := range []struct {
		name      string
		retry     Retry
		timeout   time.Duration
		answers   []*notify.Error
		wantTries int
		wantErr   string // "": accepted
	}{
		{"accepted at once", fast, relaxed, nil, 1, ""},
		{"a 500 then accepted", fast, relaxed, []*notify.Error{http500}, 2, ""},
		{"429 and 500 then accepted", fast, relaxed, []*notify.Error{http429, http500, http500}, 4, ""},
		{"Tries caps a failing target", fast, relaxed, []*notify.Error{http500, http500, http500, http500, http500}, 4, "HTTP 500"},
		{"a 400 is not tried again", fast, relaxed, []*notify.Error{http400}, 1, "HTTP 400"},
		{"an unreachable target is not tried again in the call", fast, relaxed, []*notify.Error{refused}, 1, "connection refused"},
		{"Off tries once", Retry{Off: true}, relaxed, []*notify.Error{http500}, 1, "HTTP 500"},
		// 2 × the first wait (40 ms) is more than the 30 ms left: no second try.
		{"no wait longer than half the time left", Retry{First: 20 * time.Millisecond, Max: time.Second, Tries: 4}, tinyTime, []*notify.Error{http500}, 1, "HTTP 500"},
		{"the last failure is returned", fast, relaxed, []*notify.Error{http500, http400}, 2, "HTTP 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &scriptedNotifier{answers: tc.answers}
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			var tried, retried int
			err := tc.retry.withDefaults().notify(ctx, n, notify.Message{Text: "x"},
				func(time.Duration) { tried++ }, func(*notify.Error) { retried++ })
			if n.tries != tc.wantTries || tried != tc.wantTries || retried != tc.wantTries-1 {
				t.Errorf("tries %d (tried %d, retried %d), want %d", n.tries, tried, retried, tc.wantTries)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err %v, want accepted", err)
			case tc.wantErr != "" && (err == nil || err.Class != tc.wantErr):
				t.Errorf("err %v, want %s", err, tc.wantErr)
			}
		})
	}
}

// TestRetryStageWaitEndsWithTheContext: a push whose caller gives up
// while it waits to try again returns at once with its last failure.
func TestRetryStageWaitEndsWithTheContext(t *testing.T) {
	n := &scriptedNotifier{answers: []*notify.Error{{Class: "HTTP 503", Retryable: true}}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	r := Retry{First: 10 * time.Minute, Max: 10 * time.Minute, Tries: 4}
	var err *notify.Error
	testkit.NoHang(t, "a retry wait after the context ended", func() {
		err = r.notify(ctx, n, notify.Message{}, func(time.Duration) {}, func(*notify.Error) { cancel() })
	})
	if err == nil || err.Class != "HTTP 503" || n.tries != 1 {
		t.Errorf("err %v after %d tries, want HTTP 503 after 1", err, n.tries)
	}
}

// TestPipelineRetriesABarkThatRecovers: a Bark that answers 503 once and
// then accepts gets the push within the one Send: the push counts once as
// ok, its retry in lavender_bark_push_retries_total, and the run log's
// line says it was sent.
func TestPipelineRetriesABarkThatRecovers(t *testing.T) {
	srv := barktest.New(t, "KEY")
	srv.SetFault(barktest.FailFirst(1, barktest.Status(503, "busy")))
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, func(c *Config) {
		c.Retry = Retry{First: time.Millisecond, Max: time.Millisecond, Tries: 3}
	})
	p := f.send("swap 54%", "[lavender-2] swap 54% full")
	if p.OK != 1 || p.Failed != 0 {
		t.Errorf("ok=%d failed=%d, want the push accepted", p.OK, p.Failed)
	}
	if n := len(srv.Pushes()); n != 2 {
		t.Errorf("Bark got %d requests, want 2 (a 503, then the retry)", n)
	}
	if got := srv.Accepted(); len(got) != 1 || !strings.Contains(got[0].Body, "swap 54% full") {
		t.Errorf("accepted %+v, want the push once", got)
	}
	m := f.metrics()
	for _, c := range []struct {
		name   string
		labels testkit.Labels
		want   float64
	}{
		{"lavender_bark_push_retries_total", testkit.Labels{"target": "phone.bark.env:1"}, 1},
		{"lavender_bark_pushes_total", testkit.Labels{"target": "phone.bark.env:1", "result": "ok"}, 1},
		{"lavender_bark_pushes_total", testkit.Labels{"target": "phone.bark.env:1", "result": "failed"}, 0},
	} {
		if v := m.MustValue(t, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	if strings.Contains(f.logs.String(), "push failed") {
		t.Errorf("a push that passed on its retry was logged as failed:\n%s", f.logs)
	}
}
