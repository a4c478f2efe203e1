package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
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
// method; 405 (with Allow) is only for a known path, so it never suggests
// that a path exists.
func TestUnknownPathIs404(t *testing.T) {
	t.Parallel()
	t.Run("serve", func(t *testing.T) {
		procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.1)})
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
		base := startInProcess(t, nil, "bridge", "--bark.config-dir", t.TempDir(), "--runlog.dir", t.TempDir()).base
		testkit.WaitReady(t, nil, base, "", "")
		checkRoutes(t, base, []routeCase{
			{"POST", "/webhooks", 404, ""},
			{"POST", "/api/v1/heartbeat", 404, ""},
			{"GET", "/webhook", 405, "POST"},
			{"POST", "/", 405, "GET, HEAD"},
		})
	})
}

// writeReq is one raw write with the headers a browser or a client sets.
func writeReq(t *testing.T, client *http.Client, base, path, body string, header map[string]string, user, pass string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestWritesFromOtherSitesAndHosts: a web page the operator
// opens cannot write (an Origin not the server's own, Sec-Fetch-Site:
// cross-site, or a body not declared as JSON), and a peer off the box
// cannot write without --web.write-allow or basic auth. Reads stay open.
func TestWritesFromOtherSitesAndHosts(t *testing.T) {
	t.Parallel()
	webhook, err := os.ReadFile(filepath.Join("..", "..", "webhook", "testdata", "firing_swap_54.json"))
	if err != nil {
		t.Fatal(err)
	}
	writes := []struct{ path, body string }{
		{"/webhook", string(webhook)},
		{"/api/v1/heartbeat", `{"phase":"Evil","event":"start"}`},
		{"/api/v1/runs", `{"header":"evil"}`},
		{"/-/reload", ""},
	}
	textPlain := "text/plain;charset=UTF-8" // what a form or fetch() sends without a preflight

	t.Run("other sites", func(t *testing.T) {
		procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.1)})
		r := startServe(t, procfs, "--watchdog.interval=0")
		runBefore := runlogtest.Text(t, r.logDir)
		for _, w := range writes {
			for _, h := range []map[string]string{
				{"Content-Type": textPlain, "Origin": "http://evil.example"},
				{"Content-Type": "application/json", "Origin": "http://evil.example"},
				{"Content-Type": textPlain, "Sec-Fetch-Site": "cross-site"},
				{"Content-Type": "application/json", "Origin": "null"},
			} {
				if code, body := writeReq(t, http.DefaultClient, r.base, w.path, w.body, h, "", ""); code != 403 {
					t.Errorf("POST %s with %v = %d %q, want 403", w.path, h, code, body)
				}
			}
			if w.path == "/-/reload" {
				continue
			}
			if code, body := writeReq(t, http.DefaultClient, r.base, w.path, w.body, map[string]string{"Content-Type": textPlain}, "", ""); code != 415 {
				t.Errorf("POST %s as text/plain = %d %q, want 415", w.path, code, body)
			}
		}
		if n := r.bark.Count(); n != 0 {
			t.Errorf("Bark got %d pushes from refused webhooks", n)
		}
		if after := runlogtest.Text(t, r.logDir); after != runBefore || strings.Contains(after, "Evil") {
			t.Errorf("refused writes changed the run log:\n%s\nwant\n%s", after, runBefore)
		}
		// The same writes as Alertmanager and `lavender phase` send them pass.
		for _, w := range writes {
			h := map[string]string{"Content-Type": "application/json"}
			if code, body := writeReq(t, http.DefaultClient, r.base, w.path, w.body, h, "", ""); code/100 != 2 {
				t.Errorf("POST %s as JSON from this host = %d %q", w.path, code, body)
			}
		}
		if r.bark.Count() != 1 {
			t.Errorf("Bark got %d pushes, want 1", r.bark.Count())
		}
	})

	reads := []string{"/metrics", "/", "/api/v1/status", "/api/v1/phases", "/-/healthy", "/-/ready"}
	t.Run("other hosts", func(t *testing.T) {
		// 127.0.0.1 outside the allow list stands for a host off the box.
		procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.1)})
		r := startServe(t, procfs, "--watchdog.interval=0", "--web.write-allow=192.0.2.0/24", "--web.write-allow=2001:db8::/32")
		for _, w := range writes {
			code, body := writeReq(t, http.DefaultClient, r.base, w.path, w.body, map[string]string{"Content-Type": "application/json"}, "", "")
			if code != 403 || !strings.Contains(body, "--web.write-allow") {
				t.Errorf("POST %s from a peer not allowed = %d %q, want 403 naming --web.write-allow", w.path, code, body)
			}
		}
		if n := r.bark.Count(); n != 0 {
			t.Errorf("Bark got %d pushes", n)
		}
		for _, path := range reads {
			if code, _ := testkit.MustDo(t, nil, "GET", r.base+path, nil, "", ""); code != 200 {
				t.Errorf("GET %s = %d, want 200: reads stay open", path, code)
			}
		}
	})

	t.Run("other hosts with basic auth", func(t *testing.T) {
		certs := testkit.NewTLS(t)
		webConfig := testkit.WriteWebConfig(t, testkit.WebConfig{TLS: certs, Users: map[string]string{"alice": "s3cret-pass"}})
		client := certs.Client()
		serve := startInProcess(t, nil, testkit.QuietServeArgs(t, barktest.ConfigDir(t, nil), t.TempDir(),
			"--web.write-allow=192.0.2.0/24", "--web.config.file="+webConfig)...)
		base := "https://" + strings.TrimPrefix(serve.base, "http://")
		testkit.WaitReady(t, client, base, "alice", "s3cret-pass")
		h := map[string]string{"Content-Type": "application/json"}
		if code, body := writeReq(t, client, base, "/api/v1/heartbeat", `{"phase":"Train","event":"start"}`, h, "alice", "s3cret-pass"); code != 200 {
			t.Errorf("authenticated heartbeat from a peer not allowed = %d %q, want 200", code, body)
		}
		if code, _ := writeReq(t, client, base, "/api/v1/heartbeat", `{"phase":"Train","event":"ping"}`, h, "alice", "wrong"); code != 401 {
			t.Errorf("wrong password = %d, want 401", code)
		}
	})

	t.Run("bad flag", func(t *testing.T) {
		cli := parseCLI(t, "serve", "--web.listen-address=127.0.0.1:0", "--web.write-allow=10.0.0/8")
		err := cli.Serve.serve(t.Context(), testGlobals(io.Discard, io.Discard), nil, nil)
		if err == nil || !strings.Contains(err.Error(), `--web.write-allow "10.0.0/8"`) {
			t.Errorf("serve = %v, want an error naming the flag and value", err)
		}
	})
}
