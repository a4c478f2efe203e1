package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"lavender/internal/barktest"
	"lavender/internal/testkit"
	"lavender/runlog"
)

func TestHTTPServerTimeouts(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout,
		"ReadTimeout":       srv.ReadTimeout,
		"WriteTimeout":      srv.WriteTimeout,
		"IdleTimeout":       srv.IdleTimeout,
	} {
		if d <= 0 {
			t.Errorf("%s is %v: a slow or idle client could hold a connection forever", name, d)
		}
	}
	if srv.ReadHeaderTimeout > srv.ReadTimeout {
		t.Errorf("ReadHeaderTimeout %v exceeds ReadTimeout %v", srv.ReadHeaderTimeout, srv.ReadTimeout)
	}
	// A webhook waits on Bark for up to --bark.timeout (default 5s) plus the
	// margin; the answer must fit in the write timeout, or Alertmanager sees
	// a reset instead of a 200 for a push that went out.
	if min := 5*time.Second + webhookMargin; srv.WriteTimeout < min {
		t.Errorf("WriteTimeout %v is under the default Bark timeout plus margin, %v", srv.WriteTimeout, min)
	}
	if srv.ErrorLog == nil {
		t.Error("no ErrorLog: the server's own errors (TLS handshakes, panics) would go to stderr unformatted")
	}
}

// TestBodyLimitsEveryPOST: every endpoint that takes a POST refuses a body
// over its limit with 413, whether the length is declared or chunked, and
// nothing of it is acted on.
func TestBodyLimitsEveryPOST(t *testing.T) {
	bark := barktest.New(t)
	barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.Template(barktest.Key) + "\n"})
	logDir := t.TempDir()
	serve := testkit.StartCommand(t, quietServeArgs(t, barkDir, logDir)...)
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
		{"/webhook", 1 << 20, swapAlertWebhook(1), 200},
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
