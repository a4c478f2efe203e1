package webguard

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGuardRefusesReboundNames: a page from http://evil.example:9877 whose
// name is rebound to 127.0.0.1 is same-origin to the browser and connects
// from loopback; only its Host gives it away. Every write of that shape is
// refused, naming the flag that would allow the name, while the names a
// page cannot take over, and writes with credentials, still pass.
func TestGuardRefusesReboundNames(t *testing.T) {
	dir := t.TempDir()
	webConfig := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(webConfig, []byte("basic_auth_users:\n  alice: $2y$10$notcheckedhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, Config{
		WriteAllow:    mustPrefixes(t, "127.0.0.0/8", "::1/128"),
		JSONPaths:     []string{"/webhook", "/api/v1/heartbeat"},
		HostName:      "gpu-3",
		AllowedHosts:  []string{"lavender", "Alerts.Example."},
		ExternalURL:   "https://lav.example:9110/",
		WebConfigFile: webConfig,
	})
	rebound := func(host string) map[string]string {
		return map[string]string{"Host": host, "Origin": "http://" + host, "Sec-Fetch-Site": "same-origin", "Content-Type": jsonCT}
	}
	for _, tc := range []reqCase{
		{name: "heartbeat", method: "POST", path: "/api/v1/heartbeat", body: "{}", header: rebound("evil.example:9877"), code: 403, want: `--web.allowed-host=evil.example`},
		{name: "new run", method: "POST", path: "/api/v1/runs", header: rebound("evil.example:9877"), code: 403, want: `{"error":"writes to Host \"evil.example:9877\" are refused`},
		{name: "reload", method: "POST", path: "/-/reload", header: rebound("evil.example:9877"), code: 403, want: "--web.allowed-host"},
		{name: "webhook", method: "POST", path: "/webhook", body: "{}", header: rebound("evil.example:9877"), code: 403, want: "this host's name (gpu-3)"},
		{name: "no port", method: "POST", path: "/-/reload", header: rebound("evil.example"), code: 403},
		{name: "a name under localhost's", method: "POST", path: "/-/reload", header: rebound("localhost.evil.example"), code: 403},
		{name: "a name ending in an address", method: "POST", path: "/-/reload", header: rebound("127.0.0.1.nip.io"), code: 403},
		{name: "the own name inside another", method: "POST", path: "/-/reload", header: rebound("gpu-3.evil.example"), code: 403},
		{name: "without browser headers", method: "POST", path: "/-/reload", header: map[string]string{"Host": "evil.example:9877"}, code: 403},

		{name: "IPv4 literal", method: "POST", path: "/webhook", body: "{}", header: rebound("127.0.0.1:9877"), code: 200},
		{name: "another address", method: "POST", path: "/-/reload", header: rebound("10.1.2.3"), code: 200},
		{name: "IPv6 literal", method: "POST", path: "/-/reload", header: rebound("[::1]:9877"), code: 200},
		{name: "IPv6 without port", method: "POST", path: "/-/reload", header: rebound("[::1]"), code: 200},
		{name: "localhost", method: "POST", path: "/-/reload", header: rebound("localhost:9877"), code: 200},
		{name: "LOCALHOST.", method: "POST", path: "/-/reload", header: rebound("LOCALHOST.:9877"), code: 200},
		{name: "own name", method: "POST", path: "/-/reload", header: rebound("gpu-3:9877"), code: 200},
		{name: "allowed name", method: "POST", path: "/-/reload", header: rebound("lavender:9877"), code: 200},
		{name: "allowed name, any case", method: "POST", path: "/-/reload", header: rebound("alerts.example"), code: 200},
		{name: "external URL's host", method: "POST", path: "/-/reload", header: rebound("lav.example:9110"), code: 200},

		{name: "basic auth writes under any Host", method: "POST", path: "/-/reload", header: rebound("evil.example:9877"), user: "alice", pass: "checked by the toolkit", code: 200},
		{name: "reads stay open", method: "GET", path: "/api/v1/status", header: rebound("evil.example:9877"), code: 200},
	} {
		r.check(t, tc)
	}
}

func TestParseAllowedHosts(t *testing.T) {
	got, err := ParseAllowedHosts([]string{"lavender", "GPU-3.Example.", "lavender-bridge.lavender.svc"})
	if err != nil || !slices.Equal(got, []string{"lavender", "gpu-3.example", "lavender-bridge.lavender.svc"}) {
		t.Errorf("ParseAllowedHosts = %q, %v", got, err)
	}
	for _, bad := range []string{"", "http://lavender", "lavender:9877", "a b", "[::1]"} {
		if _, err := ParseAllowedHosts([]string{bad}); err == nil || !strings.Contains(err.Error(), "--web.allowed-host") {
			t.Errorf("ParseAllowedHosts(%q) = %v, want an error naming the flag", bad, err)
		}
	}
}
