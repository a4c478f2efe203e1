package webhook

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/notify"
	"github.com/lavender-ml/lavender/watchdog"
)

func TestWebhookRejects(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, func(c *fixtureConfig) { c.MaxBodyBytes = 64 << 10 })
	big := bytes.Repeat([]byte(" "), 64<<10+1) // whitespace is valid JSON padding: only the size is wrong
	copy(big, readTestdata(t, "firing_swap_54.json"))

	tests := []struct {
		name   string
		method string
		body   io.Reader
		chunk  bool // hide the length, as a chunked upload does
		code   int
		answer string
	}{
		{"GET", "GET", nil, false, 405, "only POST requests allowed\n"},
		{"PUT", "PUT", bytes.NewReader(readTestdata(t, "firing_swap_54.json")), false, 405, "only POST requests allowed\n"},
		{"malformed JSON", "POST", bytes.NewReader(readTestdata(t, "malformed.json")), false, 400, "malformed JSON: unexpected end of JSON input\n"},
		{"empty body", "POST", strings.NewReader(""), false, 400, "malformed JSON: unexpected end of JSON input\n"},
		{"JSON null", "POST", strings.NewReader("null"), false, 400, "unsupported webhook version \"\", want \"4\"\n"},
		{"version 3", "POST", bytes.NewReader(readTestdata(t, "version3.json")), false, 400, "unsupported webhook version \"3\", want \"4\"\n"},
		{"over the limit", "POST", bytes.NewReader(big), false, 413, "body over the limit of 65536 bytes\n"},
		{"over the limit, chunked", "POST", bytes.NewReader(big), true, 413, "body over the limit of 65536 bytes\n"},
		{"at the limit", "POST", bytes.NewReader(big[:64<<10]), false, 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/webhook", tt.body)
			if tt.chunk {
				req.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			f.mux.ServeHTTP(rec, req)
			if rec.Code != tt.code || rec.Body.String() != tt.answer {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body.String(), tt.code, tt.answer)
			}
			if tt.code == 405 && rec.Header().Get("Allow") != "POST" {
				t.Errorf("Allow = %q", rec.Header().Get("Allow"))
			}
		})
	}
	for code, want := range map[string]float64{"405": 2, "400": 4, "413": 2, "200": 1, "503": 0} {
		if v := f.metrics().MustValue(t, "lavender_webhook_requests_total", testkit.Labels{"code": code}); v != want {
			t.Errorf("webhook_requests_total{code=%s} = %v, want %v", code, v, want)
		}
	}
	if n := len(srv.Pushes()); n != 1 {
		t.Errorf("Bark got %d pushes, want 1", n)
	}
}

// TestWebhookRetryTable: one target per case; the webhook's status, the
// counters, the run-log line and the tries of the retry stage follow
// Bark's answer: a failure that may pass is tried fixtureRetry.Tries
// times within the one webhook, one that cannot (4xx, an answer that is
// not Bark's) once.
func TestWebhookRetryTable(t *testing.T) {
	tests := []struct {
		name    string
		fault   barktest.Fault // how Bark answers; nil: success
		down    bool           // nothing listens at the target
		code    int
		result  string // pushes_total result
		logLine string
		answer  string
		tries   int // requests Bark got
	}{
		{"200", nil, false, 200, "ok", "BARK swap 54% sent ok=1 fail=0", "", 1},
		{"400", barktest.Status(400, "push failed"), false, 200, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: HTTP 400", 1},
		{"429", barktest.Status(429, "too many requests"), false, 503, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: HTTP 429", fixtureRetry.Tries},
		{"500", barktest.Status(500, "push failed"), false, 503, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: HTTP 500", fixtureRetry.Tries},
		// The one try takes the whole timeout: no time is left for a second.
		{"hang", barktest.Hang(), false, 503, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: timeout", 1},
		{"closed port", nil, true, 503, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: connection refused", 0},
		{"not Bark", barktest.PlainOK(), false, 200, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: not-bark", 1},
	}
	payload := readTestdata(t, "firing_swap_54.json")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := barktest.DownURL(t) + "/KEY/$0"
			var srv *barktest.Server
			if !tt.down {
				srv = barktest.New(t, "KEY")
				srv.SetFault(tt.fault)
				line = srv.Template("KEY")
			}
			f := newFixture(t, map[string]string{"phone.bark.env": line}, func(c *fixtureConfig) {
				if tt.name == "hang" {
					c.Timeout = hangTimeout
				}
			})
			code, answer := f.post(payload)
			if code != tt.code {
				t.Errorf("status %d, want %d; answer %q", code, tt.code, answer)
			}
			// An alert whose every push failed is not "pushed".
			action, head := "pushed", "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n"
			if tt.result == "failed" {
				action, head = "failed", "alerts=1 pushed=0 failed=1 skipped=0 duplicate=0\n"
			}
			if !strings.HasPrefix(answer, head) || !strings.Contains(answer, tt.answer) {
				t.Errorf("answer %q lacks %q or %q", answer, head, tt.answer)
			}
			if v := f.metrics().MustValue(t, "lavender_bark_pushes_total", testkit.Labels{"target": "phone.bark.env:1", "result": tt.result}); v != 1 {
				t.Errorf("pushes_total{result=%s} = %v", tt.result, v)
			}
			if v := f.metrics().MustValue(t, "lavender_webhook_alerts_total", testkit.Labels{"status": "firing", "action": action}); v != 1 {
				t.Errorf("alerts_total{firing,%s} = %v", action, v)
			}
			if got := f.barkLines(); len(got) != 1 || got[0] != tt.logLine {
				t.Errorf("run log BARK lines %q, want [%q]", got, tt.logLine)
			}
			if srv != nil && len(srv.Pushes()) != tt.tries {
				t.Errorf("Bark got %d requests, want %d", len(srv.Pushes()), tt.tries)
			}
			if v := f.metrics().MustValue(t, "lavender_bark_push_retries_total", testkit.Labels{"target": "phone.bark.env:1"}); v != float64(max(tt.tries-1, 0)) {
				t.Errorf("push_retries_total = %v, want %d", v, max(tt.tries-1, 0))
			}
		})
	}
}

// TestWebhookRetryReachesOnlyFailedTargets plays Alertmanager: it resends the
// whole group after a 503, and only the target that failed gets the push.
func TestWebhookRetryReachesOnlyFailedTargets(t *testing.T) {
	good, flaky, gone := barktest.New(t, "KG"), barktest.New(t, "KF"), barktest.New(t, "KX")
	flaky.SetFault(barktest.Status(500, "push failed: APNs refused"))
	gone.SetFault(barktest.Status(400, "push failed: APNs refused")) // permanent: answered 200, not retried by Alertmanager
	f := newFixture(t, map[string]string{
		"a.bark.env": good.Template("KG"),
		"b.bark.env": flaky.Template("KF"),
		"c.bark.env": gone.Template("KX"),
	}, func(c *fixtureConfig) {
		c.Retry.Off = true // one try a webhook: this is Alertmanager's resend
	})
	payload := readTestdata(t, "two_alerts.json")

	code, answer := f.post(payload)
	if code != 503 {
		t.Fatalf("first delivery: %d %q", code, answer)
	}
	counts := func() string {
		return fmt.Sprintf("good=%d flaky=%d gone=%d", len(good.Pushes()), len(flaky.Pushes()), len(gone.Pushes()))
	}
	if got := counts(); got != "good=2 flaky=2 gone=2" {
		t.Fatalf("after first delivery: %s", got)
	}

	// Alertmanager retries; Bark is still failing.
	code, _ = f.post(payload)
	if got := counts(); code != 503 || got != "good=2 flaky=4 gone=4" {
		t.Fatalf("second delivery: %d, %s", code, got)
	}

	// Bark recovers: the retry reaches the flaky target once per alert.
	flaky.SetFault(nil)
	code, answer = f.post(payload)
	if got := counts(); code != 200 || got != "good=2 flaky=6 gone=6" {
		t.Fatalf("third delivery: %d %q, %s", code, answer, got)
	}

	// Everything that can accept has: an HA peer's copy pushes nothing new
	// except to the permanently failing target, and answers 200.
	code, answer = f.post(payload)
	if got := counts(); code != 200 || got != "good=2 flaky=6 gone=8" {
		t.Fatalf("fourth delivery: %d %q, %s", code, answer, got)
	}
	gone.SetFault(nil)
	f.post(payload)
	code, answer = f.post(payload)
	if got := counts(); code != 200 || got != "good=2 flaky=6 gone=10" || answer != "alerts=2 pushed=0 failed=0 skipped=0 duplicate=2\n" {
		t.Fatalf("after all accepted: %d %q, %s", code, answer, got)
	}

	wantLog := []string{
		"BARK swap 54% sent ok=1 fail=2", "BARK PhaseStalled sent ok=1 fail=2",
		"BARK swap 54% sent ok=0 fail=2", "BARK PhaseStalled sent ok=0 fail=2",
		"BARK swap 54% sent ok=1 fail=1", "BARK PhaseStalled sent ok=1 fail=1",
		"BARK swap 54% sent ok=0 fail=1", "BARK PhaseStalled sent ok=0 fail=1",
		"BARK swap 54% sent ok=1 fail=0", "BARK PhaseStalled sent ok=1 fail=0",
	}
	if got := f.barkLines(); strings.Join(got, "\n") != strings.Join(wantLog, "\n") {
		t.Errorf("run log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantLog, "\n"))
	}
	for target, want := range map[string][2]float64{"a.bark.env:1": {2, 0}, "b.bark.env:1": {2, 4}, "c.bark.env:1": {2, 8}} {
		ok := f.metrics().MustValue(t, "lavender_bark_pushes_total", testkit.Labels{"target": target, "result": "ok"})
		failed := f.metrics().MustValue(t, "lavender_bark_pushes_total", testkit.Labels{"target": target, "result": "failed"})
		if ok != want[0] || failed != want[1] {
			t.Errorf("%s: ok=%v failed=%v, want %v", target, ok, failed, want)
		}
	}
	if v := f.metrics().MustValue(t, "lavender_webhook_alerts_total", testkit.Labels{"status": "firing", "action": "duplicate"}); v != 2 {
		t.Errorf("alerts_total{duplicate} = %v", v)
	}
	if v := f.metrics().MustValue(t, "lavender_webhook_requests_total", testkit.Labels{"code": "503"}); v != 2 {
		t.Errorf("requests_total{503} = %v", v)
	}
}

// TestWebhookConcurrentCopiesShareTheOutcome: an HA peer's copy that waits
// on the push its twin started reports that push's outcome: a failure is a
// failure (503, so Alertmanager retries), not a skipped alert.
func TestWebhookConcurrentCopiesShareTheOutcome(t *testing.T) {
	srv := barktest.New(t, "KEY")
	srv.SetFault(barktest.Hang())
	// Long enough for the copy to arrive while the first push hangs; the
	// test asserts no time, only that Bark saw one request.
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, func(c *fixtureConfig) { c.Timeout = 2 * time.Second })
	payload := readTestdata(t, "firing_swap_54.json")
	type answer struct {
		code int
		text string
	}
	first := make(chan answer, 1)
	go func() {
		code, text := f.post(payload)
		first <- answer{code, text}
	}()
	srv.WaitPushes(t, 1)
	code, text := f.post(payload)
	copies := []answer{<-first, {code, text}}
	if n := len(srv.Pushes()); n != 1 {
		t.Fatalf("Bark got %d pushes; the copy did not wait on the first", n)
	}
	for i, a := range copies {
		if a.code != 503 || !strings.HasPrefix(a.text, "alerts=1 pushed=0 failed=1 skipped=0 duplicate=0\n") ||
			!strings.Contains(a.text, "swap 54%: phone.bark.env:1 failed: timeout") {
			t.Errorf("copy %d answered %d %q", i, a.code, a.text)
		}
	}
	for action, want := range map[string]float64{"failed": 2, "pushed": 0, "skipped": 0, "duplicate": 0} {
		if v := f.metrics().MustValue(t, "lavender_webhook_alerts_total", testkit.Labels{"status": "firing", "action": action}); v != want {
			t.Errorf("alerts_total{%s} = %v, want %v", action, v, want)
		}
	}
	// One push, so one run-log line.
	if got := f.barkLines(); len(got) != 1 || got[0] != "BARK swap 54% sent ok=0 fail=1" {
		t.Errorf("run log %q", got)
	}
}

// TestWebhookHACopiesPushOnce: two Alertmanagers deliver the same group at
// the same moment; the phone gets one push.
func TestWebhookHACopiesPushOnce(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, nil)
	payload := readTestdata(t, "firing_swap_54.json")
	const peers = 8
	var wg sync.WaitGroup
	codes := make([]int, peers)
	for i := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = f.post(payload)
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Errorf("peer %d got %d", i, c)
		}
	}
	if n := len(srv.Pushes()); n != 1 {
		t.Errorf("Bark got %d pushes, want 1", n)
	}
	if got := f.barkLines(); len(got) != 1 {
		t.Errorf("run log: %q", got)
	}
	if v, err := f.metrics().Sum("lavender_webhook_alerts_total", testkit.Labels{"action": "duplicate"}); err != nil || v != peers-1 {
		t.Errorf("duplicates = %v (%v)", v, err)
	}
}

func TestWebhookDedupWindowAndKey(t *testing.T) {
	srv := barktest.New(t, "KEY")
	now := time.Date(2026, 4, 24, 0, 45, 0, 0, time.UTC)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, func(c *fixtureConfig) {
		c.Now = func() time.Time { return now }
		c.SendResolved = true
		c.DedupMaxEntries = 3
	})
	firing := readTestdata(t, "firing_swap_54.json")
	pushes := func() int { return len(srv.Pushes()) }

	f.post(firing)
	now = now.Add(59 * time.Minute)
	f.post(firing)
	if pushes() != 1 {
		t.Fatalf("pushed again inside the window: %d", pushes())
	}
	now = now.Add(2 * time.Minute) // the first push is 61 minutes old
	f.post(firing)
	if pushes() != 2 {
		t.Fatalf("not pushed again after the window: %d", pushes())
	}

	// Resolution is another notification, and so is a new firing (new startsAt).
	f.post(readTestdata(t, "resolved_swap.json"))
	refired := bytes.Replace(firing, []byte("2026-04-24T00:45:00Z"), []byte("2026-04-24T03:00:00Z"), 1)
	f.post(refired)
	if pushes() != 4 {
		t.Fatalf("resolved and re-fired: %d pushes, want 4", pushes())
	}
	// A fingerprint-less payload is keyed on its labels instead.
	nofp := bytes.Replace(firing, []byte(`"fingerprint": "5f0d3a1b2c4e6f70"`), []byte(`"fingerprint": ""`), 1)
	f.post(nofp)
	f.post(nofp)
	if pushes() != 5 {
		t.Fatalf("fingerprint-less copies: %d pushes, want 5", pushes())
	}
	if n := f.bridge.DedupLen(); n > 3 {
		t.Errorf("dedup holds %d entries over its cap of 3", n)
	}
}

// TestWebhookSkips: a swap alert under --bark.threshold, when one is set,
// and a resolution without --bark.send-resolved are counted as skipped,
// pushed nowhere and logged.
func TestWebhookSkips(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, func(c *fixtureConfig) { c.Threshold = 0.5 })
	for _, file := range []string{"below_threshold.json", "resolved_swap.json"} {
		code, answer := f.post(readTestdata(t, file))
		if code != 200 || answer != "alerts=1 pushed=0 failed=0 skipped=1 duplicate=0\n" {
			t.Errorf("%s: %d %q", file, code, answer)
		}
	}
	if n := len(srv.Pushes()); n != 0 {
		t.Errorf("Bark got %d pushes", n)
	}
	if v := f.metrics().MustValue(t, "lavender_webhook_alerts_total", testkit.Labels{"status": "firing", "action": "skipped"}); v != 1 {
		t.Errorf("firing skipped = %v", v)
	}
	if v := f.metrics().MustValue(t, "lavender_webhook_alerts_total", testkit.Labels{"status": "resolved", "action": "skipped"}); v != 1 {
		t.Errorf("resolved skipped = %v", v)
	}
	if got := f.barkLines(); len(got) != 0 {
		t.Errorf("run log lines for skipped alerts: %q", got)
	}
	if logs := f.logs.String(); !strings.Contains(logs, "swap alert under the bridge's threshold: not pushed") || !strings.Contains(logs, "threshold=0.5") {
		t.Errorf("the skip under the threshold is not logged:\n%s", logs)
	}
}

// TestWatchdogPushSharesTheWebhookPath: the watchdog's swap push and the
// webhook's swap alert give the same text and the same run-log line.
func TestWatchdogPushSharesTheWebhookPath(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY") + "\n" + barktest.DownURL(t) + "/K2/$0"}, nil)
	ok, failed := f.pusher.Push(t.Context(), []watchdog.Alert{swapAlert(0.54, giBytes(16.3), 32*bytesPerGiB)})
	if ok != 1 || failed != 1 {
		t.Errorf("Push = %d, %d", ok, failed)
	}
	f.post(readTestdata(t, "firing_swap_54.json"))
	got := srv.Pushes()
	if len(got) != 2 || got[0].Body != got[1].Body || got[0].Body != "[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening" {
		t.Errorf("watchdog and webhook pushed differently: %+v", got)
	}
	if lines := f.barkLines(); strings.Join(lines, "|") != "BARK swap 54% sent ok=1 fail=1|BARK swap 54% sent ok=1 fail=1" {
		t.Errorf("run log: %q", lines)
	}
}

// TestWebhookRunLogSubjects: the pressure and OOM alerts get the watchdog's
// run-log subjects.
func TestWebhookRunLogSubjects(t *testing.T) {
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, nil)
	f.post(readTestdata(t, "firing_pressure_23.json"))
	f.post(readTestdata(t, "firing_oom_phase.json"))
	if lines := f.barkLines(); strings.Join(lines, "|") != "BARK pressure 23% sent ok=1 fail=0|BARK oom 1 kill sent ok=1 fail=0" {
		t.Errorf("run log: %q", lines)
	}
}

// TestSecretNeverLeaks runs every failure mode with the key SECRETKEY123 and
// looks for it in the logs, errors, answers, metrics and the run log.
func TestSecretNeverLeaks(t *testing.T) {
	const key = "SECRETKEY123"
	failing, hanging, teapot := barktest.New(t, key), barktest.New(t, key), barktest.New(t, key)
	failing.SetFault(barktest.EchoPath(500)) // its JSON message repeats the key
	hanging.SetFault(barktest.Hang())
	teapot.SetFault(barktest.Status(418, "push failed: APNs refused"))
	healthy := barktest.New(t, key) // checks the key, which a faulty server does not
	lines := []string{
		barktest.DownURL(t) + "/" + key + "/$0",
		failing.Template(key),
		hanging.Template(key),
		teapot.Template(key),
		healthy.URL + "/" + key + "x/$0", // unknown key: Bark's 400 quotes it
		"http://user:" + key + "@" + strings.TrimPrefix(teapot.URL, "http://") + "/k/$0", // key as a password
		"http://127.0.0.1:1/" + key + "/$0?token=" + key,
	}
	f := newFixture(t, map[string]string{"phone.bark.env": strings.Join(lines, "\n")}, func(c *fixtureConfig) {
		c.SendResolved = true
		c.Timeout = 500 * time.Millisecond // room for the failing targets to answer on a loaded machine
	})

	var seen strings.Builder
	for _, file := range []string{"firing_swap_54.json", "two_alerts.json", "resolved_swap.json", "version3.json", "malformed.json"} {
		code, answer := f.post(readTestdata(t, file))
		fmt.Fprintf(&seen, "%d %s\n", code, answer)
	}
	loaded, _ := delivery.LoadTargets(f.dir, nil)
	for _, r := range delivery.SendEach(t.Context(), loaded.Notifiers, f.cfg.Timeout, func(notify.Notifier) notify.Message { return notify.Message{Text: "hello " + key} }) {
		fmt.Fprintf(&seen, "%v %+v %#v\n", r, r, r.Err)
	}
	f.pusher.Push(t.Context(), []watchdog.Alert{swapAlert(0.9, 0, 0), pressureAlert(0.5, watchdog.Swap{}), oomAlert(1, watchdog.Victim{PID: 1, Name: "python3"}, "", watchdog.Swap{})})

	// A bad line is an error naming file:line only.
	barktest.AddTargets(t, f.dir, map[string]string{"bad.bark.env": "ftp://" + key + "/$0\nhttps://x/" + key + "\n"})
	if err := f.bridge.Reload(); err != nil {
		fmt.Fprintln(&seen, err)
	} else {
		t.Error("bad config reloaded")
	}
	_, err := bark.LoadTargets(f.dir)
	fmt.Fprintln(&seen, err)
	_, reloadAnswer := f.do("POST", "/-/reload")
	seen.WriteString(reloadAnswer)

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(f.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	seen.WriteString(rec.Body.String())
	seen.WriteString(f.logs.String())
	for _, e := range f.runlogEntries() {
		seen.WriteString(e + "\n")
	}

	if strings.Contains(seen.String(), key) {
		for _, l := range strings.Split(seen.String(), "\n") {
			if strings.Contains(l, key) {
				t.Errorf("key leaked: %s", l)
			}
		}
	}
	// The check above is only worth something if the failures happened.
	for _, want := range []string{"failed: HTTP 500", "failed: timeout", "failed: connection refused", "failed: HTTP 418", "failed: HTTP 400", "bad.bark.env:1", "detail="} {
		if !strings.Contains(seen.String(), want) {
			t.Errorf("no %q in what was checked", want)
		}
	}
}

// TestWebhookAnswerIsBounded: a group with many alerts and a hanging Bark
// still gets its answer once the timeout has passed, with every push that
// could not start counted as a retryable failure.
func TestWebhookAnswerIsBounded(t *testing.T) {
	srv := barktest.New(t, "KEY")
	srv.SetFault(barktest.Hang())
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, func(c *fixtureConfig) {
		c.MaxParallel = 2
		c.Timeout = hangTimeout
	})
	var alerts []string
	for i := range 20 {
		alerts = append(alerts, fmt.Sprintf(`{"status":"firing","labels":{"alertname":"A%d"},"annotations":{},"startsAt":"2026-04-24T00:45:00Z","fingerprint":"%d"}`, i, i))
	}
	payload := `{"version":"4","status":"firing","alerts":[` + strings.Join(alerts, ",") + `]}`
	code, answer := f.post([]byte(payload))
	if code != 503 || !strings.Contains(answer, "alerts=20 pushed=0 failed=20 skipped=0") || !strings.Contains(answer, "… and 10 more failures") {
		t.Errorf("%d %q", code, answer)
	}
	if n := len(srv.Pushes()); n > 2 {
		t.Errorf("%d pushes started with MaxParallel 2 and a hanging Bark", n)
	}
	if v := f.metrics().MustValue(t, "lavender_bark_pushes_total", testkit.Labels{"result": "failed"}); v != 20 {
		t.Errorf("failed pushes = %v, want 20", v)
	}
	if got := len(f.barkLines()); got == 0 {
		t.Error("no run-log lines")
	}
}

func TestRegisterUsesOnlyTheGivenMux(t *testing.T) {
	f := newFixture(t, nil, nil)
	for _, path := range []string{"/webhook", "/-/reload"} {
		if _, pattern := http.DefaultServeMux.Handler(httptest.NewRequest("POST", path, nil)); pattern != "" {
			t.Errorf("%s registered on http.DefaultServeMux", path)
		}
		if _, pattern := f.mux.Handler(httptest.NewRequest("POST", path, nil)); pattern != path {
			t.Errorf("%s not on the given mux: %q", path, pattern)
		}
	}
}

// TestWebhookPayloads posts every testdata payload to a healthy Bark and
// checks the answer and exactly what the phone receives.
func TestWebhookPayloads(t *testing.T) {
	tests := []struct {
		file   string
		code   int
		answer string
		bodies []string
	}{
		{"firing_swap_54.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening"}},
		// No --bark.threshold: the alert rule, set lower, decides.
		{"below_threshold.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] swap 31% full (9.9/32.0 GB) — consider intervening"}},
		{"resolved_swap.json", 200, "alerts=1 pushed=0 failed=0 skipped=1 duplicate=0\n", nil},
		{"non_swap.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] PhaseStalled: no heartbeat for 15m in Pretrain 1/3"}},
		{"missing_annotations.json", 200, "alerts=3 pushed=3 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] Swap is filling up on gpu-box", "[lavender-2] SwapUsageHigh", "[lavender-2] PhaseStalled"}},
		{"two_alerts.json", 200, "alerts=2 pushed=2 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening", "[lavender-2] PhaseStalled: no heartbeat for 15m"}},
		{"unknown_fields.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening"}},
		{"firing_pressure_23.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] memory pressure 23% (last 1m), swap 25% full (0.5/2.0 GB) — consider intervening"}},
		{"firing_pressure_noswap.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] memory pressure 23% (last 1m), no swap — consider intervening"}},
		{"firing_oom_phase.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{`[lavender-2] OOM killer struck (1 kill), victim unknown — swap 56% full (1.1/2.0 GB)`}},
		{"firing_oom_kills.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] OOM killer struck (3 kills), victim unknown — swap 56% full (1.1/2.0 GB)"}},
		// Not plain decimals: the summary stands in, no invented number.
		{"firing_oom_hex.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] OOMKill: OOM killer struck on gpu-box"}},
		{"version3.json", 400, "unsupported webhook version \"3\", want \"4\"\n", nil},
		{"malformed.json", 400, "malformed JSON: unexpected end of JSON input\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := barktest.New(t, "KEY")
			// The same phone twice: it still gets each alert once.
			f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY") + "\n" + srv.Template("KEY")}, nil)
			code, answer := f.post(readTestdata(t, tt.file))
			if code != tt.code || answer != tt.answer {
				t.Errorf("got %d %q, want %d %q", code, answer, tt.code, tt.answer)
			}
			var bodies []string
			for _, p := range srv.Pushes() {
				if p.Title != "" || p.Level != "passive" || p.IsArchive != "0" {
					t.Errorf("push %+v is not a silent, unarchived, untitled push", p)
				}
				bodies = append(bodies, p.Body)
			}
			// Alerts of a group are pushed concurrently; compare as sets.
			if got, want := sorted(bodies), sorted(tt.bodies); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("pushed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if got := len(f.barkLines()); got != len(tt.bodies) {
				t.Errorf("%d run-log lines for %d pushes", got, len(tt.bodies))
			}
		})
	}
}

func sorted(ss []string) []string {
	out := append([]string(nil), ss...)
	slices.Sort(out)
	return out
}

// manyAlerts is a group of n firing alerts, each its own (no dedup).
func manyAlerts(n int) []byte {
	alerts := make([]string, n)
	for i := range alerts {
		alerts[i] = fmt.Sprintf(`{"status":"firing","labels":{"alertname":"A%d"},"startsAt":"2026-04-24T00:45:00Z","fingerprint":"%016x"}`, i, i)
	}
	return []byte(`{"version":"4","status":"firing","alerts":[` + strings.Join(alerts, ",") + `]}`)
}

// TestWebhookStartsNoGoroutineBeforeASlot: a group of hundreds of alerts
// against a hanging Bark holds MaxParallel pushes in flight, and no
// goroutine waits for a slot: goroutines (each a stack of at least 8 KiB,
// and one per alert and target) are what took a 12,000-alert webhook's RSS
// to hundreds of MiB.
func TestWebhookStartsNoGoroutineBeforeASlot(t *testing.T) {
	srv := barktest.New(t, "KEY")
	srv.SetFault(barktest.Hang())
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY") + "\n" + srv.Template("KEY") + "?group=b"}, func(c *fixtureConfig) {
		c.MaxParallel = 2
		c.Timeout = 2 * time.Second // the count is taken while the first pushes hang
	})
	before := runtime.NumGoroutine()
	done := make(chan string, 1)
	go func() {
		_, answer := f.post(manyAlerts(300))
		done <- answer
	}()
	srv.WaitPushes(t, 2)
	// The most seen over a while: goroutines started per push would pile
	// up while the first two hang.
	during := 0
	for range 100 {
		during = max(during, runtime.NumGoroutine())
		time.Sleep(2 * time.Millisecond)
	}
	answer := <-done
	// The handler, two pushes and their server and transport goroutines:
	// a few dozen at most, where one per alert and target would be 600.
	if during-before > 40 {
		t.Errorf("%d goroutines while 2 pushes hang (%d before)", during, before)
	}
	if !strings.HasPrefix(answer, "alerts=300 pushed=0 failed=300 ") {
		t.Errorf("answer %q", answer)
	}
	if n := len(srv.Pushes()); n > 2 {
		t.Errorf("%d pushes started with MaxParallel 2 and a hanging Bark", n)
	}
}

// TestWebhookOneWarnPerTargetPerRequest: a large group against a Bark that
// is down logs one WARN line per target, not one per push.
func TestWebhookOneWarnPerTargetPerRequest(t *testing.T) {
	f := newFixture(t, map[string]string{"phone.bark.env": barktest.DownURL(t) + "/K1/$0\n" + barktest.DownURL(t) + "/K2/$0"}, nil)
	code, answer := f.post(manyAlerts(50))
	if code != 503 || !strings.HasPrefix(answer, "alerts=50 pushed=0 failed=50 ") {
		t.Errorf("%d %q", code, answer)
	}
	var warns []string
	for _, line := range strings.Split(f.logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") {
			warns = append(warns, line)
		}
	}
	want := []string{`msg="push failed" target=phone.bark.env:1 class="connection refused" pushes=50 failed=50`, `msg="push failed" target=phone.bark.env:2 class="connection refused" pushes=50 failed=50`}
	if len(warns) != len(want) {
		t.Fatalf("%d WARN lines, want %d:\n%s", len(warns), len(want), strings.Join(warns, "\n"))
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(warns, "\n"), w) {
			t.Errorf("no WARN line with %q:\n%s", w, strings.Join(warns, "\n"))
		}
	}
	if v, err := f.metrics().Sum("lavender_bark_pushes_total", testkit.Labels{"result": "failed"}); err != nil || v != 100 {
		t.Errorf("failed pushes = %v (%v), want 100", v, err)
	}
	// Ten BARK lines, then one for the rest.
	lines := f.barkLines()
	if len(lines) != 11 || lines[0] != "BARK A0 sent ok=0 fail=2" || lines[10] != "BARK 40 more alerts sent ok=0 fail=80" {
		t.Errorf("run log BARK lines:\n%s", strings.Join(lines, "\n"))
	}
}

// TestWebhookStopsDialingATargetThatCannotBeReached: once a target fails
// in a way the next push would repeat (refused, unreachable, unknown host,
// TLS), the group's remaining pushes to it fail with the same class without
// a dial; Alertmanager's retry of the group tries them all again.
func TestWebhookStopsDialingATargetThatCannotBeReached(t *testing.T) {
	var conns atomic.Int64
	// It counts connections, which no Bark stand-in does; the handler is
	// never reached, since the bridge refuses its certificate.
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "past a refused handshake", http.StatusInternalServerError)
	}))
	tlsSrv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors are the point
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	good := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": tlsSrv.URL + "/KEY/$0\n" + good.Template("KEY")}, func(c *fixtureConfig) { c.MaxParallel = 2 })
	code, answer := f.post(manyAlerts(200))
	if code != 503 || !strings.HasPrefix(answer, "alerts=200 pushed=200 failed=0 ") || !strings.Contains(answer, "A0: phone.bark.env:1 failed: tls") {
		t.Errorf("%d %q", code, answer)
	}
	if n := conns.Load(); n >= 20 {
		t.Errorf("%d connections to a target whose certificate is refused, for 200 alerts", n)
	}
	if n := len(good.Pushes()); n != 200 {
		t.Errorf("the reachable target got %d pushes, want 200", n)
	}
	if v := f.metrics().MustValue(t, "lavender_bark_pushes_total", testkit.Labels{"target": "phone.bark.env:1", "result": "failed"}); v != 200 {
		t.Errorf("failed pushes = %v, want 200", v)
	}
}
