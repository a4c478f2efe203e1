package testkit

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestDoAndWaitReady(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, _ := r.BasicAuth(); u != "u" || p != "p" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/-/ready" && asked.Add(1) < 3 {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type")))
	}))
	t.Cleanup(srv.Close)

	WaitReady(t, nil, srv.URL, "u", "p")
	if n := asked.Load(); n != 3 {
		t.Errorf("asked /-/ready %d times, want 3 (two 503s, then 200)", n)
	}
	if code, body := MustDo(t, nil, "POST", srv.URL+"/x", []byte("{}"), "u", "p"); code != 200 || body != "POST /x application/json" {
		t.Errorf("MustDo: %d %q", code, body)
	}
	if code, _, err := Do(nil, "GET", srv.URL+"/x", nil, "", ""); err != nil || code != 401 {
		t.Errorf("without credentials: %d %v", code, err)
	}
	msg := fails(t, func(tb testing.TB) { MustDo(tb, nil, "GET", "http://"+RefusingAddr(t)+"/", nil, "", "") })
	if !strings.Contains(msg, "connection refused") {
		t.Errorf("MustDo to a closed port: %q", msg)
	}
}

func TestFreeAddrs(t *testing.T) {
	addrs := FreeAddrs(t, 3)
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] || !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("addresses %v: repeated or not loopback", addrs)
		}
		seen[a] = true
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s is not free: %v", a, err)
			continue
		}
		l.Close()
	}
}

// TestRefusingAddrRefuses: a connection to RefusingAddr is refused, and
// the port cannot be taken by a listener while the test holds it.
func TestRefusingAddrRefuses(t *testing.T) {
	addr := RefusingAddr(t)
	if c, err := net.Dial("tcp", addr); err == nil || !strings.Contains(err.Error(), "connection refused") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("listen on %s succeeded while RefusingAddr holds it", addr)
	}
}
