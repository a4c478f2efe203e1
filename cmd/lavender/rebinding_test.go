package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// hostWrite is one write with the given Host header.
func hostWrite(t *testing.T, base, host, path, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestWritesUnderAReboundName: a page from http://evil.example:9877 whose
// name is rebound to 127.0.0.1 is same-origin to the browser and connects
// from loopback. Its heartbeat, new run, reload and webhook are refused
// with 403 naming --web.allowed-host; nothing is pushed or recorded. The
// same writes under an IP address, localhost, the host's name or an
// allowed name pass.
func TestWritesUnderAReboundName(t *testing.T) {
	t.Parallel()
	webhook, err := os.ReadFile(filepath.Join("..", "..", "webhook", "testdata", "firing_swap_54.json"))
	if err != nil {
		t.Fatal(err)
	}
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.1)})
	r := startServe(t, procfs, "--watchdog.interval=0", "--web.allowed-host=lavender")
	writes := []struct{ path, body string }{
		{"/api/v1/heartbeat", `{"phase":"G1","event":"ping"}`},
		{"/api/v1/runs", ""},
		{"/-/reload", ""},
		{"/webhook", string(webhook)},
	}
	browser := func(host string) map[string]string {
		return map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
	}
	runBefore := runlogtest.Text(t, r.logDir)
	for _, w := range writes {
		code, body := hostWrite(t, r.base, "evil.example:9877", w.path, w.body, browser("evil.example:9877"))
		if code != 403 || !strings.Contains(body, "--web.allowed-host=evil.example") {
			t.Errorf("POST %s under Host evil.example:9877 = %d %q, want 403 naming --web.allowed-host", w.path, code, body)
		}
	}
	if n := r.bark.Count(); n != 0 {
		t.Errorf("Bark got %d pushes from refused webhooks", n)
	}
	if after := runlogtest.Text(t, r.logDir); after != runBefore {
		t.Errorf("refused writes changed the run log:\n%s\nwant\n%s", after, runBefore)
	}
	port := r.base[strings.LastIndex(r.base, ":")+1:]
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, app.Hostname() + ":" + port, "lavender:" + port} {
		if code, body := hostWrite(t, r.base, host, "/api/v1/heartbeat", `{"phase":"G1","event":"ping"}`, browser(host)); code != 200 {
			t.Errorf("heartbeat under Host %s = %d %q, want 200", host, code, body)
		}
	}
	t.Run("bad flag", func(t *testing.T) {
		cli := parseCLI(t, "serve", "--web.listen-address=127.0.0.1:0", "--web.allowed-host=http://lavender")
		err := cli.Serve.serve(t.Context(), testGlobals(io.Discard, io.Discard), nil, nil)
		if err == nil || !strings.Contains(err.Error(), `--web.allowed-host "http://lavender"`) {
			t.Errorf("serve = %v, want an error naming the flag and value", err)
		}
	})
}
