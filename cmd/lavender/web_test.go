package main

import (
	"net/http"
	"strings"
	"testing"
)

// routeCase is one request and the status and Allow header it must get.
type routeCase struct {
	method, path string
	code         int
	allow        string
}

func checkRoutes(t *testing.T, base string, cases []routeCase) {
	t.Helper()
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s = %d Allow %q, want %d Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), tc.code, tc.allow)
		}
	}
}

// TestUnknownPathIs404: a path that does not exist answers 404 whatever the
// method; 405 (with Allow) is only for a known path (issue 14.5).
func TestUnknownPathIs404(t *testing.T) {
	t.Run("serve", func(t *testing.T) {
		procfs := newFakeProcfs(t)
		procfs.setSwap(swap32GiBinKB, 0.1)
		r := startServe(t, procfs, "--watchdog.interval=0")
		checkRoutes(t, r.base, []routeCase{
			{"POST", "/webhooks", 404, ""},
			{"POST", "/api/v1/heartbeats", 404, ""},
			{"POST", "/api/v1/run", 404, ""},
			{"GET", "/nope", 404, ""},
			{"GET", "/webhook", 405, "POST"},
			{"GET", "/-/reload", 405, "POST, PUT"},
			{"GET", "/api/v1/heartbeat", 405, "POST"},
			{"POST", "/api/v1/phases", 405, "GET, HEAD"},
			{"POST", "/", 405, "GET, HEAD"},
		})
	})
	t.Run("bridge", func(t *testing.T) {
		base, _ := startBridge(t, "--bark.config-dir", t.TempDir(), "--runlog.dir", t.TempDir())
		checkRoutes(t, base, []routeCase{
			{"POST", "/webhooks", 404, ""},
			{"POST", "/api/v1/heartbeat", 404, ""},
			{"GET", "/webhook", 405, "POST"},
			{"POST", "/", 405, "GET, HEAD"},
		})
	})
}
