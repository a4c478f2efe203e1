package e2e

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

// TestBodyLimitsEveryPOST: every endpoint that takes a POST refuses a body
// over its limit with 413, whether the length is declared or chunked, and
// nothing of it is acted on.
func TestBodyLimitsEveryPOST(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	bark := barktest.New(t)
	barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.Template(barktest.Key) + "\n"})
	logDir := t.TempDir()
	serve := testkit.StartCommand(t, testkit.QuietServeArgs(t, barkDir, logDir)...)
	base := serve.URL(t)
	testkit.WaitReady(t, nil, base, "", "")
	runBefore, _ := runlog.CurrentPath(logDir)

	client := &http.Client{Timeout: 30 * time.Second}
	for _, tc := range []struct {
		path  string
		limit int
		ok    []byte // a valid body
		okish int
	}{
		{"/webhook", 1 << 20, testkit.SwapAlertWebhook(1), 200},
		{"/api/v1/heartbeat", 64 << 10, []byte(`{"phase":"Train","event":"start"}`), 200},
		{"/api/v1/runs", 64 << 10, nil, 0}, // not sent: it would start a run
		{"/-/reload", 64 << 10, nil, 200},
	} {
		// Valid JSON padded with spaces, so only the size is wrong.
		over := append(bytes.Repeat([]byte(" "), tc.limit+1-len(`{}`)), `{}`...)
		for _, chunked := range []bool{false, true} {
			req, _ := http.NewRequest("POST", base+tc.path, bytes.NewReader(over))
			req.Header.Set("Content-Type", "application/json")
			if chunked {
				req.ContentLength = -1
				req.Body = io.NopCloser(bytes.NewReader(over))
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("POST %s (%d bytes, chunked %v): %v", tc.path, len(over), chunked, err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("POST %s with %d bytes (chunked %v): %d %q, want 413", tc.path, len(over), chunked, resp.StatusCode, msg)
			}
		}
		if tc.okish != 0 {
			if code, body := testkit.MustDo(t, client, "POST", base+tc.path, tc.ok, "", ""); code != tc.okish {
				t.Errorf("POST %s with a good body after the big ones: %d %q", tc.path, code, body)
			}
		}
	}
	if runAfter, _ := runlog.CurrentPath(logDir); runAfter != runBefore {
		t.Errorf("an oversized POST /api/v1/runs started run %s", runAfter)
	}
	if n := bark.Count(); n != 1 {
		t.Errorf("Bark got %d pushes, want 1 (the good webhook only)", n)
	}
	m := testkit.Scrape(t, client, base+"/metrics")
	if v := m.MustValue(t, "lavender_webhook_requests_total", testkit.Labels{"code": "413"}); v != 2 {
		t.Errorf("webhook 413s counted: %v, want 2", v)
	}
}
