package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestBarkFaults: for each way Bark can fail, the webhook answers as
// Alertmanager's retry logic needs (503: retry; 200: a 4xx that will not
// pass), within --bark.timeout plus the margin, with the failure counted
// and recorded; a failure that may pass is tried again within the timeout,
// one that cannot (a 4xx, an unreachable target) once; and while a push
// hangs, scrapes and heartbeats answer.
func TestBarkFaults(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	const barkTimeout = 2 * time.Second
	for _, tc := range []struct {
		name  string
		fault barktest.Fault // how a reachable Bark answers
		class string
		code  int
		// tries the push got: the retry stage waits 250 ms, then 500 ms,
		// and no wait over half the time left, so within 2 s a 5xx gets
		// three tries, or two on a machine slow enough to lose 250 ms.
		minTries, maxTries int
	}{
		{"down", nil, "connection refused", 503, 1, 1},
		{"hang", barktest.Hang(), "timeout", 503, 1, 1},
		{"500", barktest.EchoPath(500), "HTTP 500", 503, 2, 3}, // bark-server's messages can quote the path, key included
		{"400", barktest.EchoPath(400), "HTTP 400", 200, 1, 1},
		{"reset", barktest.Reset(), "connection reset", 503, 2, 3},
		{"tls", nil, "tls", 503, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bark := barktest.New(t)
			bark.SetFault(tc.fault)
			target := bark.Template(barktest.Key)
			switch tc.name {
			case "down":
				target = barktest.DownURL(t) + "/" + barktest.Key + "/$0"
			case "tls":
				target = barktest.NewTLS(t).Template(barktest.Key)
			}
			barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": target + "\n"})
			logDir := t.TempDir()
			serve := testkit.StartCommand(t, testkit.QuietServeArgs(t, barkDir, logDir, "--bark.timeout="+barkTimeout.String())...)
			base := serve.URL(t)
			testkit.WaitReady(t, nil, base, "", "")

			type answer struct {
				code    int
				body    string
				elapsed time.Duration
				err     error
			}
			done := make(chan answer, 1)
			start := time.Now()
			go func() {
				code, body, err := testkit.Do(nil, "POST", base+"/webhook", testkit.SwapAlertWebhook(7), "", "")
				done <- answer{code, body, time.Since(start), err}
			}()

			if tc.name == "hang" {
				bark.WaitPushes(t, 1)
				// The push hangs now: everything else must answer before it
				// ends. This is an order, not a timing: the webhook cannot
				// answer before the Bark timeout has passed.
				for _, r := range []struct{ method, path, body string }{
					{"GET", "/metrics", ""},
					{"POST", "/api/v1/heartbeat", `{"phase":"Train","event":"start"}`},
					{"POST", "/api/v1/heartbeat", `{"phase":"Train","event":"ping"}`},
					{"GET", "/api/v1/phases", ""},
					{"GET", "/-/ready", ""},
				} {
					if code, body := testkit.MustDo(t, nil, r.method, base+r.path, []byte(r.body), "", ""); code != 200 {
						t.Errorf("%s %s while a push hangs: %d %q", r.method, r.path, code, body)
					}
				}
				select {
				case a := <-done:
					t.Fatalf("the webhook answered (%d after %v) before the other requests were done", a.code, a.elapsed)
				default:
				}
			}

			a := <-done
			if a.err != nil {
				t.Fatal(a.err)
			}
			t.Logf("%s: %d after %v: %q", tc.name, a.code, a.elapsed.Round(time.Millisecond), a.body)
			if a.code != tc.code {
				t.Errorf("webhook answered %d, want %d: %q", a.code, tc.code, a.body)
			}
			if bound := barkTimeout + app.WebhookMargin; a.elapsed > bound {
				t.Errorf("webhook answered after %v, over the bound of --bark.timeout + margin = %v", a.elapsed, bound)
			}
			if want := "phone.bark.env:1 failed: " + tc.class; !strings.Contains(a.body, want) {
				t.Errorf("answer %q lacks %q", a.body, want)
			}
			m := testkit.Scrape(t, nil, base+"/metrics")
			retries := m.MustValue(t, "lavender_bark_push_retries_total", testkit.Labels{"target": "phone.bark.env:1"})
			if tries := int(retries) + 1; tries < tc.minTries || tries > tc.maxTries {
				t.Errorf("the push was tried %d times, want %d to %d", tries, tc.minTries, tc.maxTries)
			}
			if tc.fault != nil {
				if n := bark.Count(); n != int(retries)+1 {
					t.Errorf("Bark got %d requests, but lavender_bark_push_retries_total says %v retries", n, retries)
				}
			}
			for _, s := range []struct {
				name   string
				labels testkit.Labels
				want   float64
			}{
				{"lavender_bark_pushes_total", testkit.Labels{"result": "failed", "target": "phone.bark.env:1"}, 1},
				{"lavender_bark_pushes_total", testkit.Labels{"result": "ok", "target": "phone.bark.env:1"}, 0},
				{"lavender_webhook_requests_total", testkit.Labels{"code": strconv.Itoa(tc.code)}, 1},
				{"lavender_webhook_alerts_total", testkit.Labels{"action": "failed", "status": "firing"}, 1},
				{"lavender_runlog_write_errors_total", testkit.Labels{"writer": "bark"}, 0},
			} {
				if got := m.MustValue(t, s.name, s.labels); got != s.want {
					t.Errorf("%s%v = %v, want %v", s.name, s.labels, got, s.want)
				}
			}
			if log := runlogtest.Text(t, logDir); !strings.Contains(log, " BARK swap 54% sent ok=0 fail=1\n") {
				t.Errorf("run log lacks the failed push:\n%s", log)
			}
			if !serve.Logged(`msg="push failed" target=phone.bark.env:1 class=`, tc.class) {
				t.Errorf("log lacks the failure:\n%s", serve.Stderr)
			}
		})
	}
}
