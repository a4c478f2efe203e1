package webhook

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// stateFixture is a bridge with a state file, a clock and storm control
// at one push a minute, which can be restarted as after a crash.
type stateFixture struct {
	*fixture
	srv   *barktest.Server
	clock *testkit.Clock
	path  string
}

func newStateFixture(t *testing.T) *stateFixture {
	t.Helper()
	srv := barktest.New(t)
	clock := newTestClock()
	path := filepath.Join(t.TempDir(), "logs", delivery.StateFileName)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) {
		c.Now, c.MaxPerMinute, c.StateFile = clock.Now, 1, path
	})
	sf := &stateFixture{fixture: f, srv: srv, clock: clock, path: path}
	t.Cleanup(func() { sf.bridge.Close() })
	return sf
}

// restart builds a new bridge from the same config, files and clock, as a
// process started after the last one died: nothing is carried over but
// the files.
func (f *stateFixture) restart() {
	f.t.Helper()
	f.bridge.Close() // as the process's death releases its lock
	f.logs, f.reg, f.mux = &testkit.SyncBuffer{}, prometheus.NewRegistry(), nil
	f.open(slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

// stormAlert is swap alert i, each a new alert.
func stormAlert(i int) webhookAlert {
	return webhookAlert{name: "SwapUsageHigh", instance: "gpu-3:9100", fingerprint: fmt.Sprintf("%016x", i+1), startsAt: incidentStart.Add(time.Duration(i) * time.Second)}
}

// postAlerts posts alerts from…to-1 and returns the answers.
func (f *stateFixture) postAlerts(from, to int) []string {
	f.t.Helper()
	var answers []string
	for i := from; i < to; i++ {
		code, answer := f.post(webhookBody(f.t, stormAlert(i)))
		if code != 200 {
			f.t.Fatalf("alert %d: %d %q", i, code, answer)
		}
		answers = append(answers, answer)
	}
	return answers
}

// TestStateKeepsHeldAlertsAndDedupAcrossACrash: a bridge that dies while
// it holds alerts leaves them in its state file. The next one sends their
// summary once the window of the pushes before the crash is over, and
// treats every alert the first had pushed or held as a duplicate until
// the dedup window from the first push ends, not from the restart.
func TestStateKeepsHeldAlertsAndDedupAcrossACrash(t *testing.T) {
	f := newStateFixture(t)
	answers := f.postAlerts(0, 3)
	if !strings.Contains(answers[0], "pushed=1") || !strings.Contains(answers[1], "held=1") || !strings.Contains(answers[2], "held=1") {
		t.Fatalf("answers %q, want one push and two held", answers)
	}
	f.clock.Advance(10 * time.Second)
	f.restart()
	if log := f.logs.String(); !strings.Contains(log, "restored Bark state") || !strings.Contains(log, "held=2 dedup=3") {
		t.Errorf("the restart does not say what it restored:\n%s", log)
	}
	for i, answer := range f.postAlerts(0, 3) {
		if !strings.Contains(answer, "duplicate=1") {
			t.Errorf("alert %d after the restart: %q, want a duplicate", i, answer)
		}
	}
	f.bridge.SendDue(t.Context(), f.clock.Now())
	if n := f.srv.Count(); n != 1 {
		t.Fatalf("%d pushes 10 s after the first: the restart must not reopen the window", n)
	}
	f.clock.Set(incidentStart.Add(time.Minute))
	f.bridge.SendDue(t.Context(), f.clock.Now())
	got := f.srv.Pushes()
	if len(got) != 2 || got[1].Body != "[lavender-2] 2 more alerts held across a restart: SwapUsageHigh ×2" {
		t.Fatalf("pushes %+v, want the first and the summary", got)
	}
	// The dedup memory kept its expiry: an hour after the first push, not
	// after the restart.
	f.clock.Set(incidentStart.Add(delivery.DefaultDedupWindow - time.Second))
	f.restart()
	if answers := f.postAlerts(0, 1); !strings.Contains(answers[0], "duplicate=1") {
		t.Errorf("a second before the dedup window ends: %q, want a duplicate", answers[0])
	}
	f.clock.Set(incidentStart.Add(delivery.DefaultDedupWindow + 2*time.Minute))
	if answers := f.postAlerts(0, 1); !strings.Contains(answers[0], "pushed=1") {
		t.Errorf("after the dedup window: %q, want a push", answers[0])
	}
}

// TestStateSummaryAtOnceWhenTheWindowPassed: a held set whose minute ended
// while the bridge was down goes out as soon as Run starts.
func TestStateSummaryAtOnceWhenTheWindowPassed(t *testing.T) {
	f := newStateFixture(t)
	f.postAlerts(0, 4)
	f.clock.Advance(2 * time.Hour) // past the window and the dedup memory
	f.restart()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); f.bridge.Run(ctx) }()
	got := f.srv.WaitPushes(t, 2)
	cancel()
	<-done
	if got[1].Body != "[lavender-2] 3 more alerts held across a restart: SwapUsageHigh ×3" {
		t.Errorf("summary %q", got[1].Body)
	}
	if lines := f.barkLines(); lines[len(lines)-1] != "BARK 3 more alerts sent ok=1 fail=0" {
		t.Errorf("run log %q", lines)
	}
}

// TestStopLetsASummaryOnTheWireFinish: a stop (Run's ctx ends) that
// comes while a summary is on its way to Bark lets it finish. Cut off, it
// counted as failed, stayed held, and the stop's Flush sent it again,
// though Bark had it: a second push of the same summary. Both ways a
// summary leaves: due at Run's start, and due on a tick.
func TestStopLetsASummaryOnTheWireFinish(t *testing.T) {
	for name, atStart := range map[string]bool{"due at start": true, "due on a tick": false} {
		t.Run(name, func(t *testing.T) {
			f := newStateFixture(t)
			f.postAlerts(0, 3) // one push, two held
			release := make(chan struct{})
			f.srv.SetFault(barktest.Hold(release))
			if atStart {
				f.clock.Advance(time.Minute)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); f.bridge.Run(ctx) }()
			if !atStart {
				f.clock.Advance(time.Minute)
			}
			f.srv.WaitPushes(t, 2)
			cancel()
			close(release)
			<-done
			f.bridge.Flush(t.Context())
			if n, ok := f.srv.Count(), len(f.srv.Accepted()); n != 2 || ok != 2 {
				t.Errorf("%d pushes, %d accepted; want the first and one summary, both accepted", n, ok)
			}
			if lines := f.barkLines(); fmt.Sprint(lines) != fmt.Sprint([]string{"BARK SwapUsageHigh sent ok=1 fail=0", "BARK 2 more alerts sent ok=1 fail=0"}) {
				t.Errorf("run log %q", lines)
			}
		})
	}
}

// TestFlushSendsHeldAlertsAndKeepsThoseThatFailed: Flush (a stop) sends
// the held alerts at once, inside the window; if Bark fails them they stay
// in the state file and the next start sends them.
func TestFlushSendsHeldAlertsAndKeepsThoseThatFailed(t *testing.T) {
	f := newStateFixture(t)
	f.postAlerts(0, 3)
	f.srv.SetFault(barktest.Status(500, "push failed"))
	f.bridge.Flush(t.Context())
	if v := f.metrics().MustValue(t, "lavender_bark_pushes_total", testkit.Labels{"target": "phone.bark.env:1", "result": "failed"}); v != 1 {
		t.Errorf("failed summary counted %v times, want 1", v)
	}
	f.srv.SetFault(nil)
	f.restart()
	if !strings.Contains(f.logs.String(), "held=2") {
		t.Errorf("the failed summary's alerts were not kept:\n%s", f.logs)
	}
	f.bridge.Flush(t.Context())
	got := f.srv.Accepted()
	if len(got) != 2 || got[1].Body != "[lavender-2] 2 more alerts held across a restart: SwapUsageHigh ×2" {
		t.Fatalf("accepted pushes %+v, want the first and the summary", got)
	}
	if v := f.metrics().MustValue(t, "lavender_bark_pushes_total", testkit.Labels{"target": "phone.bark.env:1", "result": "ok"}); v != 1 {
		t.Errorf("summary counted %v times, want 1", v)
	}
	lines := f.barkLines()
	if want := []string{"BARK SwapUsageHigh sent ok=1 fail=0", "BARK 2 more alerts sent ok=0 fail=1", "BARK 2 more alerts sent ok=1 fail=0"}; fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("run log %q, want %q", lines, want)
	}
	// Nothing is held now: a third start sends nothing.
	f.restart()
	f.bridge.Flush(t.Context())
	// The failed summary was tried fixtureRetry.Tries times.
	if n, want := f.srv.Count(), 2+fixtureRetry.Tries; n != want {
		t.Errorf("%d pushes after a start with nothing held, want %d", n, want)
	}
}

// TestUnreadableStateNeverOverwritten: a state file that can be neither
// read nor moved aside (here: bad JSON, made immutable) is left as it is;
// the bridge starts, logs it at ERROR, counts each refused save, and once
// the file can be moved it is, and saving resumes with what was kept in
// memory.
func TestUnreadableStateNeverOverwritten(t *testing.T) {
	chattr, err := exec.LookPath("chattr")
	if err != nil {
		t.Skip("no chattr to make the state file immutable")
	}
	f := newStateFixture(t)
	if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := []byte("not JSON\n")
	if err := os.WriteFile(f.path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(chattr, "+i", f.path).CombinedOutput(); err != nil {
		t.Skipf("chattr +i not allowed here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(chattr, "-i", f.path).Run() })
	writeErrors := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_write_errors_total"})
	f.cfg.WriteErrors = writeErrors
	f.restart()
	if log := f.logs.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "BARK STATE CANNOT BE READ") {
		t.Errorf("the unreadable state is not reported loudly:\n%s", log)
	}
	f.postAlerts(0, 3) // one push, two held
	if data, _ := os.ReadFile(f.path); !bytes.Equal(data, bad) {
		t.Fatalf("the unreadable state file was replaced:\n%s", data)
	}
	if v := testutil.ToFloat64(writeErrors); v < 1 {
		t.Errorf("refused saves counted %v times, want at least 1", v)
	}
	if out, err := exec.Command(chattr, "-i", f.path).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v %s", err, out)
	}
	// Held too. The last try failed less than a second ago, so the save
	// is the timer's retry, within the second: it moves the file aside.
	f.postAlerts(3, 4)
	testkit.WaitFor(t, 20*time.Second, func() bool {
		_, err := os.Lstat(f.path + ".damaged")
		return err == nil
	}, "the refused save tried again once the file can be moved aside")
	if data, err := os.ReadFile(f.path + ".damaged"); err != nil || !bytes.Equal(data, bad) {
		t.Errorf("the damaged state not kept aside: %v %q", err, data)
	}
	f.restart()
	if !strings.Contains(f.logs.String(), "held=3") {
		t.Errorf("the alerts held while the file was unreadable did not survive a restart:\n%s", f.logs)
	}
}

// TestStateUnderConcurrentWebhooks: webhooks at once, each saving what it
// held before it answers, leave a state file that holds every one of them.
func TestStateUnderConcurrentWebhooks(t *testing.T) {
	f := newStateFixture(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { f.post(webhookBody(t, stormAlert(i))) })
	}
	wg.Wait()
	// The one push's dedup entry may have finished after the last held
	// save; its own save follows within a second.
	testkit.WaitFor(t, 10*time.Second, func() bool {
		data, _ := os.ReadFile(f.path)
		return bytes.Count(data, []byte(`"incident"`)) == 20
	}, "the deferred save of the dedup memory")
	f.restart()
	if !strings.Contains(f.logs.String(), "held=19 dedup=20") {
		t.Errorf("after 20 webhooks at once (1 push, 19 held), the restart restored:\n%s", f.logs)
	}
}

// TestStateLockedToOneBridge: a second bridge on the same logs dir keeps
// no state, says so at ERROR, and never touches the first one's file.
func TestStateLockedToOneBridge(t *testing.T) {
	f := newStateFixture(t)
	f.postAlerts(0, 3) // one push, two held
	saved, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.SyncBuffer{}
	hook, second := openHandler(t, f.cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "ANOTHER LAVENDER KEEPS ITS BARK STATE IN THIS LOGS DIR") {
		t.Errorf("the second bridge does not say it keeps no state:\n%s", logs)
	}
	mux := http.NewServeMux()
	hook.Register(mux)
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(webhookBody(t, stormAlert(7))))
	mux.ServeHTTP(httptest.NewRecorder(), req)
	second.Flush(t.Context())
	if data, _ := os.ReadFile(f.path); !bytes.Equal(data, saved) {
		t.Errorf("the second bridge wrote the first one's state:\n%s", data)
	}
	// Once the first is gone, the next start has the lock and the state.
	f.restart()
	if log := f.logs.String(); strings.Contains(log, "ANOTHER LAVENDER") || !strings.Contains(log, "held=2") {
		t.Errorf("the restart after the first bridge closed:\n%s", log)
	}
}

// TestStateHoldsALargeBodyWhenItIsAnswered: a body of several delivery
// chunks is saved once, after its last chunk and before the answer, and
// that save holds every alert the body held: a crash right after the
// answer loses none of them.
func TestStateHoldsALargeBodyWhenItIsAnswered(t *testing.T) {
	f := newStateFixture(t)
	const n = 2*deliverChunk + 100
	alerts := make([]webhookAlert, n)
	for i := range alerts {
		alerts[i] = stormAlert(i)
	}
	code, answer := f.post(webhookBody(t, alerts...))
	if code != 200 || !strings.Contains(answer, fmt.Sprintf("pushed=1 failed=0 skipped=0 duplicate=0 held=%d", n-1)) {
		t.Fatalf("%d %q, want one push and the rest held", code, answer)
	}
	f.restart() // at once: no deferred save had its second
	if log := f.logs.String(); !strings.Contains(log, fmt.Sprintf("held=%d ", n-1)) {
		t.Errorf("a restart right after the answer restored:\n%s", log)
	}
}
