package webguard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// rig is a guarded handler on a real loopback server that counts the
// requests that got through.
type rig struct {
	srv     *httptest.Server
	reached atomic.Int64
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	r := &rig{}
	next := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.reached.Add(1)
		io.WriteString(w, "done\n")
	})
	r.srv = httptest.NewServer(mustNew(t, next, cfg))
	t.Cleanup(r.srv.Close)
	return r
}

func mustNew(t *testing.T, next http.Handler, cfg Config) http.Handler {
	t.Helper()
	g, err := New(next, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustPrefixes(t *testing.T, values ...string) []netip.Prefix {
	t.Helper()
	p, err := ParsePrefixes(values)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type reqCase struct {
	name, method, path, body string
	header                   map[string]string
	user, pass               string
	code                     int
	want                     string // in the answer
}

func (r *rig) check(t *testing.T, tc reqCase) {
	t.Helper()
	req, err := http.NewRequest(tc.method, r.srv.URL+tc.path, strings.NewReader(tc.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range tc.header {
		if k == "Host" {
			req.Host = v // net/http sends req.Host, never a Host header
			continue
		}
		req.Header.Set(k, v)
	}
	if tc.user != "" {
		req.SetBasicAuth(tc.user, tc.pass)
	}
	before := r.reached.Load()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != tc.code || !strings.Contains(string(data), tc.want) {
		t.Errorf("%s: %d %q, want %d with %q", tc.name, resp.StatusCode, data, tc.code, tc.want)
	}
	if got := r.reached.Load() - before; (tc.code == 200) != (got == 1) {
		t.Errorf("%s: reached the handler %d times with answer %d", tc.name, got, tc.code)
	}
}

const jsonCT = "application/json"

// TestGuardFromThisHost: the test's peer is 127.0.0.1, inside the default
// allow list, so only the cross-site and Content-Type checks can refuse.
func TestGuardFromThisHost(t *testing.T) {
	r := newRig(t, Config{WriteAllow: mustPrefixes(t, DefaultWriteAllow...), JSONPaths: []string{"/webhook", "/api/v1/heartbeat"}})
	host := strings.TrimPrefix(r.srv.URL, "http://")
	for _, tc := range []reqCase{
		{name: "JSON post", method: "POST", path: "/webhook", body: "{}", header: map[string]string{"Content-Type": jsonCT}, code: 200},
		{name: "JSON with charset", method: "POST", path: "/api/v1/heartbeat", body: "{}", header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, code: 200},
		{name: "text/plain to JSON path", method: "POST", path: "/webhook", body: "{}", header: map[string]string{"Content-Type": "text/plain"}, code: 415, want: "application/json"},
		{name: "form to JSON path", method: "POST", path: "/api/v1/heartbeat", body: "a=b", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, code: 415, want: `{"error":`},
		{name: "body without a type", method: "POST", path: "/webhook", body: "{}", code: 415},
		{name: "no body, no type", method: "POST", path: "/webhook", code: 200},
		{name: "reload takes any type", method: "POST", path: "/-/reload", header: map[string]string{"Content-Type": "text/plain"}, code: 200},
		{name: "evil Origin", method: "POST", path: "/webhook", body: "{}", header: map[string]string{"Content-Type": jsonCT, "Origin": "http://evil.example"}, code: 403, want: "evil.example"},
		{name: "evil Origin on reload", method: "POST", path: "/-/reload", header: map[string]string{"Origin": "http://evil.example"}, code: 403},
		{name: "evil Origin with text/plain", method: "POST", path: "/api/v1/heartbeat", body: "{}", header: map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, code: 403},
		{name: "Origin null", method: "POST", path: "/webhook", body: "{}", header: map[string]string{"Content-Type": jsonCT, "Origin": "null"}, code: 403},
		{name: "Origin on another port", method: "POST", path: "/webhook", body: "{}", header: map[string]string{"Content-Type": jsonCT, "Origin": "http://127.0.0.1:1"}, code: 403},
		{name: "own Origin", method: "POST", path: "/webhook", body: "{}", header: map[string]string{"Content-Type": jsonCT, "Origin": "http://" + host}, code: 200},
		{name: "Sec-Fetch-Site cross-site", method: "PUT", path: "/-/reload", header: map[string]string{"Sec-Fetch-Site": "cross-site"}, code: 403, want: "cross-site"},
		{name: "Sec-Fetch-Site same-origin", method: "POST", path: "/-/reload", header: map[string]string{"Sec-Fetch-Site": "same-origin"}, code: 200},
		{name: "reads ignore Origin", method: "GET", path: "/metrics", header: map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, code: 200},
	} {
		r.check(t, tc)
	}
}

// TestGuardFromOffTheBox: with an allow list that leaves out 127.0.0.1,
// the test's peer is a host that may not write: writes get 403 naming the
// flag, reads pass, and basic auth from the web config lets writes in.
func TestGuardFromOffTheBox(t *testing.T) {
	dir := t.TempDir()
	webConfig := filepath.Join(dir, "web.yml")
	// The toolkit checks the password before the guard runs; the guard
	// only needs the user names.
	if err := os.WriteFile(webConfig, []byte("basic_auth_users:\n  alice: $2y$10$notcheckedhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	json := map[string]string{"Content-Type": jsonCT}
	refused := "writes from 127.0.0.1 are refused"

	t.Run("no credentials", func(t *testing.T) {
		r := newRig(t, Config{WriteAllow: mustPrefixes(t, "192.0.2.0/24"), JSONPaths: []string{"/webhook"}})
		for _, tc := range []reqCase{
			{name: "webhook", method: "POST", path: "/webhook", body: "{}", header: json, code: 403, want: refused},
			{name: "names the flag", method: "POST", path: "/webhook", body: "{}", header: json, code: 403, want: "--web.write-allow=CIDR"},
			{name: "API answers JSON", method: "POST", path: "/api/v1/runs", header: json, code: 403, want: `{"error":"writes from 127.0.0.1`},
			{name: "reload", method: "PUT", path: "/-/reload", code: 403, want: refused},
			{name: "DELETE", method: "DELETE", path: "/api/v1/phases", code: 403},
			{name: "a header naming a user is no credential", method: "POST", path: "/webhook", body: "{}", header: json, user: "alice", pass: "x", code: 403},
		} {
			r.check(t, tc)
		}
		for _, path := range []string{"/metrics", "/", "/api/v1/status", "/api/v1/phases", "/-/healthy", "/-/ready"} {
			r.check(t, reqCase{name: "GET " + path, method: "GET", path: path, code: 200})
			r.check(t, reqCase{name: "HEAD " + path, method: "HEAD", path: path, code: 200})
		}
	})
	t.Run("basic auth", func(t *testing.T) {
		r := newRig(t, Config{WriteAllow: mustPrefixes(t, "192.0.2.0/24"), WebConfigFile: webConfig, JSONPaths: []string{"/webhook"}})
		for _, tc := range []reqCase{
			{name: "known user", method: "POST", path: "/webhook", body: "{}", header: json, user: "alice", pass: "checked by the toolkit", code: 200},
			{name: "unknown user", method: "POST", path: "/webhook", body: "{}", header: json, user: "mallory", pass: "x", code: 403},
			{name: "no user", method: "POST", path: "/webhook", body: "{}", header: json, code: 403},
			{name: "known user still needs JSON", method: "POST", path: "/webhook", body: "{}", header: map[string]string{"Content-Type": "text/plain"}, user: "alice", code: 415},
			{name: "known user, evil Origin", method: "POST", path: "/webhook", body: "{}", header: map[string]string{"Content-Type": jsonCT, "Origin": "http://evil.example"}, user: "alice", code: 403},
		} {
			r.check(t, tc)
		}
	})
	t.Run("no allow list", func(t *testing.T) {
		r := newRig(t, Config{})
		r.check(t, reqCase{name: "nobody may write", method: "POST", path: "/-/reload", code: 403})
	})
}

// Peers other than the test's own: IPv4-mapped IPv6, IPv6 loopback, and a
// Unix socket (no address), through the handler directly.
func TestGuardPeerAddresses(t *testing.T) {
	g := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Config{WriteAllow: mustPrefixes(t, "127.0.0.0/8", "::1/128")})
	for _, tc := range []struct {
		remote string
		code   int
	}{
		{"127.0.0.1:5000", 200},
		{"127.8.9.10:5000", 200},
		{"[::1]:5000", 200},
		{"[::ffff:127.0.0.1]:5000", 200},
		{"[fe80::1%eth0]:5000", 403},
		{"10.1.2.3:5000", 403},
		{"[2001:db8::1]:5000", 403},
		{"[::ffff:10.1.2.3]:5000", 403},
		{"@", 200}, // a Unix socket
		{"garbage:1", 403},
	} {
		req := httptest.NewRequest("POST", "http://localhost:9877/-/reload", nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("peer %s: %d, want %d", tc.remote, rec.Code, tc.code)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes([]string{"10.0.0.0/8", "192.168.1.7", "fd00::/8", "10.1.2.3/16"})
	if err != nil {
		t.Fatal(err)
	}
	want := "[10.0.0.0/8 192.168.1.7/32 fd00::/8 10.1.0.0/16]"
	if fmtPrefixes(got) != want {
		t.Errorf("ParsePrefixes = %s, want %s", fmtPrefixes(got), want)
	}
	for _, bad := range []string{"", "10.0.0.0/33", "example.com", "10.0.0/8"} {
		if _, err := ParsePrefixes([]string{bad}); err == nil || !strings.Contains(err.Error(), "--web.write-allow") {
			t.Errorf("ParsePrefixes(%q) = %v, want an error naming the flag", bad, err)
		}
	}
}

func fmtPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
