package barkbridge

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

	"lavender/watchdog"
)

func TestWebhookRejects(t *testing.T) {
	srv := newBarkServer(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.template()}, func(c *Config) { c.MaxBodyBytes = 64 << 10 })
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
		if v := metricValue(t, f.reg, "lavender_webhook_requests_total", map[string]string{"code": code}); v != want {
			t.Errorf("webhook_requests_total{code=%s} = %v, want %v", code, v, want)
		}
	}
	if n := len(srv.received()); n != 1 {
		t.Errorf("Bark got %d pushes, want 1", n)
	}
}

// TestWebhookRetryTable: one target per case; the webhook's status, the
// counters and the run-log line follow Bark's answer.
func TestWebhookRetryTable(t *testing.T) {
	tests := []struct {
		name    string
		mode    string // barkServer mode; "closed" = nothing listening
		code    int
		result  string // pushes_total result
		logLine string
		answer  string
	}{
		{"200", "ok", 200, "ok", "BARK swap 54% sent ok=1 fail=0", ""},
		{"400", "status:400", 200, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: HTTP 400"},
		{"500", "status:500", 503, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: HTTP 500"},
		{"hang", "hang", 503, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: timeout"},
		{"closed port", "closed", 503, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: connection refused"},
		{"not Bark", "text", 200, "failed", "BARK swap 54% sent ok=0 fail=1", "swap 54%: phone.bark.env:1 failed: not-bark"},
	}
	payload := readTestdata(t, "firing_swap_54.json")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := closedURL(t) + "/KEY/$0"
			var srv *barkServer
			if tt.mode != "closed" {
				srv = newBarkServer(t, "KEY")
				srv.setMode(tt.mode)
				line = srv.template()
			}
			f := newFixture(t, map[string]string{"phone.bark.env": line}, func(c *Config) {
				if tt.mode == "hang" {
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
			if v := metricValue(t, f.reg, "lavender_bark_pushes_total", map[string]string{"target": "phone.bark.env:1", "result": tt.result}); v != 1 {
				t.Errorf("pushes_total{result=%s} = %v", tt.result, v)
			}
			if v := metricValue(t, f.reg, "lavender_webhook_alerts_total", map[string]string{"status": "firing", "action": action}); v != 1 {
				t.Errorf("alerts_total{firing,%s} = %v", action, v)
			}
			if got := f.barkLines(); len(got) != 1 || got[0] != tt.logLine {
				t.Errorf("run log BARK lines %q, want [%q]", got, tt.logLine)
			}
			if srv != nil && len(srv.received()) != 1 {
				t.Errorf("Bark got %d requests", len(srv.received()))
			}
		})
	}
}

// TestWebhookRetryReachesOnlyFailedTargets plays Alertmanager: it resends the
// whole group after a 503, and only the target that failed gets the push.
func TestWebhookRetryReachesOnlyFailedTargets(t *testing.T) {
	good, flaky, gone := newBarkServer(t, "KG"), newBarkServer(t, "KF"), newBarkServer(t, "KX")
	flaky.setMode("status:500")
	gone.setMode("status:400") // permanent: answered 200, not retried by Alertmanager
	f := newFixture(t, map[string]string{
		"a.bark.env": good.template(),
		"b.bark.env": flaky.template(),
		"c.bark.env": gone.template(),
	}, nil)
	payload := readTestdata(t, "two_alerts.json")

	code, answer := f.post(payload)
	if code != 503 {
		t.Fatalf("first delivery: %d %q", code, answer)
	}
	counts := func() string {
		return fmt.Sprintf("good=%d flaky=%d gone=%d", len(good.received()), len(flaky.received()), len(gone.received()))
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
	flaky.setMode("ok")
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
	gone.setMode("ok")
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
		ok := metricValue(t, f.reg, "lavender_bark_pushes_total", map[string]string{"target": target, "result": "ok"})
		failed := metricValue(t, f.reg, "lavender_bark_pushes_total", map[string]string{"target": target, "result": "failed"})
		if ok != want[0] || failed != want[1] {
			t.Errorf("%s: ok=%v failed=%v, want %v", target, ok, failed, want)
		}
	}
	if v := metricValue(t, f.reg, "lavender_webhook_alerts_total", map[string]string{"status": "firing", "action": "duplicate"}); v != 2 {
		t.Errorf("alerts_total{duplicate} = %v", v)
	}
	if v := metricValue(t, f.reg, "lavender_webhook_requests_total", map[string]string{"code": "503"}); v != 2 {
		t.Errorf("requests_total{503} = %v", v)
	}
}

// TestWebhookConcurrentCopiesShareTheOutcome: an HA peer's copy that waits
// on the push its twin started reports that push's outcome: a failure is a
// failure (503, so Alertmanager retries), not a skipped alert.
func TestWebhookConcurrentCopiesShareTheOutcome(t *testing.T) {
	srv := newBarkServer(t, "KEY")
	srv.setMode("hang")
	// Long enough for the copy to arrive while the first push hangs; the
	// test asserts no time, only that Bark saw one request.
	f := newFixture(t, map[string]string{"phone.bark.env": srv.template()}, func(c *Config) { c.Timeout = 2 * time.Second })
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
	waitForPushes(t, srv, 1)
	code, text := f.post(payload)
	copies := []answer{<-first, {code, text}}
	if n := len(srv.received()); n != 1 {
		t.Fatalf("Bark got %d pushes; the copy did not wait on the first", n)
	}
	for i, a := range copies {
		if a.code != 503 || !strings.HasPrefix(a.text, "alerts=1 pushed=0 failed=1 skipped=0 duplicate=0\n") ||
			!strings.Contains(a.text, "swap 54%: phone.bark.env:1 failed: timeout") {
			t.Errorf("copy %d answered %d %q", i, a.code, a.text)
		}
	}
	for action, want := range map[string]float64{"failed": 2, "pushed": 0, "skipped": 0, "duplicate": 0} {
		if v := metricValue(t, f.reg, "lavender_webhook_alerts_total", map[string]string{"status": "firing", "action": action}); v != want {
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
	srv := newBarkServer(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.template()}, nil)
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
	if n := len(srv.received()); n != 1 {
		t.Errorf("Bark got %d pushes, want 1", n)
	}
	if got := f.barkLines(); len(got) != 1 {
		t.Errorf("run log: %q", got)
	}
	if v := metricValue(t, f.reg, "lavender_webhook_alerts_total", map[string]string{"action": "duplicate"}); v != peers-1 {
		t.Errorf("duplicates = %v", v)
	}
}

func TestWebhookDedupWindowAndKey(t *testing.T) {
	srv := newBarkServer(t, "KEY")
	now := time.Date(2026, 4, 24, 0, 45, 0, 0, time.UTC)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.template()}, func(c *Config) {
		c.Now = func() time.Time { return now }
		c.SendResolved = true
		c.DedupMaxEntries = 3
	})
	firing := readTestdata(t, "firing_swap_54.json")
	pushes := func() int { return len(srv.received()) }

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
	if n := f.bridge.dedup.len(); n > 3 {
		t.Errorf("dedup holds %d entries over its cap of 3", n)
	}
}

func TestWebhookSkips(t *testing.T) {
	srv := newBarkServer(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.template()}, nil)
	for _, file := range []string{"below_threshold.json", "resolved_swap.json"} {
		code, answer := f.post(readTestdata(t, file))
		if code != 200 || answer != "alerts=1 pushed=0 failed=0 skipped=1 duplicate=0\n" {
			t.Errorf("%s: %d %q", file, code, answer)
		}
	}
	if n := len(srv.received()); n != 0 {
		t.Errorf("Bark got %d pushes", n)
	}
	if v := metricValue(t, f.reg, "lavender_webhook_alerts_total", map[string]string{"status": "firing", "action": "skipped"}); v != 1 {
		t.Errorf("firing skipped = %v", v)
	}
	if v := metricValue(t, f.reg, "lavender_webhook_alerts_total", map[string]string{"status": "resolved", "action": "skipped"}); v != 1 {
		t.Errorf("resolved skipped = %v", v)
	}
	if got := f.barkLines(); len(got) != 0 {
		t.Errorf("run log lines for skipped alerts: %q", got)
	}
}

// TestWatchdogPushSharesTheWebhookPath: the watchdog's swap push and the
// webhook's swap alert give the same text and the same run-log line.
func TestWatchdogPushSharesTheWebhookPath(t *testing.T) {
	srv := newBarkServer(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.template() + "\n" + closedURL(t) + "/K2/$0"}, nil)
	ok, failed := f.bridge.Push(t.Context(), []watchdog.Alert{swapAlert(0.54, giBytes(16.3), 32*bytesPerGiB)})
	if ok != 1 || failed != 1 {
		t.Errorf("Push = %d, %d", ok, failed)
	}
	f.post(readTestdata(t, "firing_swap_54.json"))
	got := srv.received()
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
	srv := newBarkServer(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.template()}, nil)
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
	failing, hanging, teapot := newBarkServer(t, key), newBarkServer(t, key), newBarkServer(t, key)
	failing.setMode("status:500") // its JSON message repeats the key
	hanging.setMode("hang")
	teapot.setMode("status:418")
	lines := []string{
		closedURL(t) + "/" + key + "/$0",
		failing.template(),
		hanging.template(),
		teapot.template(),
		teapot.URL + "/" + key + "x/$0", // unknown key: Bark's 400 quotes it
		"http://user:" + key + "@" + teapot.Listener.Addr().String() + "/k/$0", // key as a password
		"http://127.0.0.1:1/" + key + "/$0?token=" + key,
	}
	f := newFixture(t, map[string]string{"phone.bark.env": strings.Join(lines, "\n")}, func(c *Config) {
		c.SendResolved = true
		c.Timeout = 500 * time.Millisecond // room for the failing targets to answer on a loaded machine
	})

	var seen strings.Builder
	for _, file := range []string{"firing_swap_54.json", "two_alerts.json", "resolved_swap.json", "version3.json", "malformed.json"} {
		code, answer := f.post(readTestdata(t, file))
		fmt.Fprintf(&seen, "%d %s\n", code, answer)
	}
	for _, r := range f.bridge.Send(t.Context(), "hello "+key) {
		fmt.Fprintf(&seen, "%v %+v %#v\n", r, r, r.Err)
	}
	f.bridge.Push(t.Context(), []watchdog.Alert{swapAlert(0.9, 0, 0), pressureAlert(0.5, watchdog.Swap{}), oomAlert(1, watchdog.Victim{PID: 1, Name: "python3"}, "", watchdog.Swap{})})

	// A bad line is an error naming file:line only.
	writeTargets(t, f.dir, map[string]string{"bad.bark.env": "ftp://" + key + "/$0\nhttps://x/" + key + "\n"})
	if err := f.bridge.Reload(); err != nil {
		fmt.Fprintln(&seen, err)
	} else {
		t.Error("bad config reloaded")
	}
	_, err := LoadTargets(f.dir)
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
	srv := newBarkServer(t, "KEY")
	srv.setMode("hang")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.template()}, func(c *Config) {
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
	if n := len(srv.received()); n > 2 {
		t.Errorf("%d pushes started with MaxParallel 2 and a hanging Bark", n)
	}
	if v := metricValue(t, f.reg, "lavender_bark_pushes_total", map[string]string{"result": "failed"}); v != 20 {
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
		{"below_threshold.json", 200, "alerts=1 pushed=0 failed=0 skipped=1 duplicate=0\n", nil},
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
			[]string{`[lavender-2] OOM killer struck (1 kill) during "Pretrain 1/3" — swap 56% full (1.1/2.0 GB)`}},
		{"firing_oom_kills.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] OOM killer struck (3 kills) — swap 56% full (1.1/2.0 GB)"}},
		// Not plain decimals: the summary stands in, no invented number.
		{"firing_oom_hex.json", 200, "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n",
			[]string{"[lavender-2] OOMKill: OOM killer struck on gpu-box"}},
		{"version3.json", 400, "unsupported webhook version \"3\", want \"4\"\n", nil},
		{"malformed.json", 400, "malformed JSON: unexpected end of JSON input\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := newBarkServer(t, "KEY")
			// The same phone twice: it still gets each alert once.
			f := newFixture(t, map[string]string{"phone.bark.env": srv.template() + "\n" + srv.template()}, nil)
			code, answer := f.post(readTestdata(t, tt.file))
			if code != tt.code || answer != tt.answer {
				t.Errorf("got %d %q, want %d %q", code, answer, tt.code, tt.answer)
			}
			var bodies []string
			for _, p := range srv.received() {
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

// waitForPushes waits, for at most 20 s, until srv has received n pushes.
func waitForPushes(t *testing.T, srv *barkServer, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); len(srv.received()) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Bark got %d pushes, waited for %d", len(srv.received()), n)
		}
	}
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
	srv := newBarkServer(t, "KEY")
	srv.setMode("hang")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.template() + "\n" + srv.template() + "?group=b"}, func(c *Config) {
		c.MaxParallel = 2
		c.Timeout = 2 * time.Second // the count is taken while the first pushes hang
	})
	before := runtime.NumGoroutine()
	done := make(chan string, 1)
	go func() {
		_, answer := f.post(manyAlerts(300))
		done <- answer
	}()
	waitForPushes(t, srv, 2)
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
	if n := len(srv.received()); n > 2 {
		t.Errorf("%d pushes started with MaxParallel 2 and a hanging Bark", n)
	}
}

// TestWebhookOneWarnPerTargetPerRequest: a large group against a Bark that
// is down logs one WARN line per target, not one per push.
func TestWebhookOneWarnPerTargetPerRequest(t *testing.T) {
	f := newFixture(t, map[string]string{"phone.bark.env": closedURL(t) + "/K1/$0\n" + closedURL(t) + "/K2/$0"}, nil)
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
	if v := metricValue(t, f.reg, "lavender_bark_pushes_total", map[string]string{"result": "failed"}); v != 100 {
		t.Errorf("failed pushes = %v, want 100", v)
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
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, "success")
	}))
	tlsSrv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors are the point
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	good := newBarkServer(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": tlsSrv.URL + "/KEY/$0\n" + good.template()}, func(c *Config) { c.MaxParallel = 2 })
	code, answer := f.post(manyAlerts(200))
	if code != 503 || !strings.HasPrefix(answer, "alerts=200 pushed=200 failed=0 ") || !strings.Contains(answer, "A0: phone.bark.env:1 failed: tls") {
		t.Errorf("%d %q", code, answer)
	}
	if n := conns.Load(); n >= 20 {
		t.Errorf("%d connections to a target whose certificate is refused, for 200 alerts", n)
	}
	if n := len(good.received()); n != 200 {
		t.Errorf("the reachable target got %d pushes, want 200", n)
	}
	if v := metricValue(t, f.reg, "lavender_bark_pushes_total", map[string]string{"target": "phone.bark.env:1", "result": "failed"}); v != 200 {
		t.Errorf("failed pushes = %v, want 200", v)
	}
}
