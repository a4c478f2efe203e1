package webguard

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestHostPeersAreThisHostsAddresses: by default a program on the box that
// connects to the host's own address (Alertmanager configured with
// http://$(hostname):9877/webhook) arrives from that address and may
// write, as loopback may; other peers may not.
func TestHostPeersAreThisHostsAddresses(t *testing.T) {
	if !slices.Equal(DefaultWriteAllow, []string{HostPeers}) {
		t.Fatalf("DefaultWriteAllow = %q, want %q", DefaultWriteAllow, HostPeers)
	}
	real, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, a := range real {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
			own = append(own, net.JoinHostPort(n.IP.String(), "5000"))
		}
	}
	if len(own) == 0 {
		t.Skip("this host has no address besides loopback")
	}
	g := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Config{WriteAllow: mustPrefixes(t, DefaultWriteAllow...)})
	for _, remote := range append(own, "127.0.0.1:5000", "[::1]:5000") {
		if code := post(g, remote); code != 200 {
			t.Errorf("peer %s (this host) got %d, want 200", remote, code)
		}
	}
	for _, remote := range []string{"192.0.2.1:5000", "[2001:db8::1]:5000"} {
		if code := post(g, remote); code != 403 {
			t.Errorf("peer %s (another host) got %d, want 403", remote, code)
		}
	}

	t.Run("refusal says what the default is", func(t *testing.T) {
		req := httptest.NewRequest("POST", "http://localhost:9877/-/reload", nil)
		req.RemoteAddr = "192.0.2.1:5000"
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		if !strings.Contains(rec.Body.String(), "default: host, meaning loopback and this host's own addresses") {
			t.Errorf("refusal %q does not say what the default allows", rec.Body)
		}
	})
	t.Run("interfaces cannot be listed", func(t *testing.T) {
		defer func(f func() ([]net.Addr, error)) { interfaceAddrs = f }(interfaceAddrs)
		interfaceAddrs = func() ([]net.Addr, error) { return nil, errors.New("netlink refused") }
		if _, err := ParsePrefixes([]string{HostPeers}); err == nil || !strings.Contains(err.Error(), "--web.write-allow=host") {
			t.Errorf("ParsePrefixes(host) = %v, want an error naming the flag", err)
		}
	})
}

func post(h http.Handler, remote string) int {
	req := httptest.NewRequest("POST", "http://localhost:9877/-/reload", nil)
	req.RemoteAddr = remote
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}
