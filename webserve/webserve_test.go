package webserve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSlowHeadersAreCutOff: a client that never finishes its headers is
// disconnected once ReadHeaderTimeout passes, while another client is
// answered. The timeout is shortened so the test is quick; the read's
// deadline only bounds a failing test.
func TestSlowHeadersAreCutOff(t *testing.T) {
	for name, d := range map[string]time.Duration{
		"ReadHeader": DefaultTimeouts.ReadHeader, "Read": DefaultTimeouts.Read,
		"Write": DefaultTimeouts.Write, "Idle": DefaultTimeouts.Idle,
	} {
		if d <= 0 {
			t.Errorf("%s timeout is %v: a slow or idle client could hold a connection for ever", name, d)
		}
	}
	short := DefaultTimeouts
	short.ReadHeader = 100 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, []net.Listener{l}, http.NotFoundHandler(), Listen{}, short, time.Second, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	slow, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := slow.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a prompt client got %d, want 404", resp.StatusCode)
	}

	slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := slow.Read(make([]byte, 512))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the slow client's connection was still open after 30s: ReadHeaderTimeout did not act")
	}
	if n > 0 || err == nil {
		t.Errorf("the slow client got %d bytes (err %v), want the connection closed", n, err)
	}
}

// TestBind: a port in use fails with the address, and no address at all
// is an error that names the flag; onListen learns the bound addresses.
func TestBind(t *testing.T) {
	var got []net.Addr
	ls, err := Bind(Listen{Addresses: []string{"127.0.0.1:0"}}, func(a []net.Addr) { got = a })
	if err != nil {
		t.Fatal(err)
	}
	defer CloseAll(ls)
	if len(got) != 1 || got[0].String() != ls[0].Addr().String() {
		t.Errorf("onListen got %v, want %v", got, ls[0].Addr())
	}
	inUse := ls[0].Addr().String()
	if _, err := Bind(Listen{Addresses: []string{"127.0.0.1:0", inUse}}, nil); err == nil || !strings.Contains(err.Error(), "listen on "+inUse) {
		t.Errorf("a port in use: %v, want an error naming %s", err, inUse)
	}
	if _, err := Bind(Listen{}, nil); err == nil || !strings.Contains(err.Error(), "--web.listen-address") {
		t.Errorf("no address: %v", err)
	}
}

// TestLifecycleAndLanding: /-/ready answers 503 until Set, /-/healthy
// always 200, and a write to the landing page 405.
func TestLifecycleAndLanding(t *testing.T) {
	mux := http.NewServeMux()
	var ready Readiness
	AddLifecycle(mux, &ready)
	if err := AddLanding(mux, "test", "/metrics"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	status := func(method, path string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/-/healthy", 200}, {"GET", "/-/ready", 503}, {"GET", "/", 200}, {"POST", "/", 405}, {"GET", "/nothing", 404},
	} {
		if got := status(tc.method, tc.path); got != tc.want {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, got, tc.want)
		}
	}
	ready.Set()
	if got := status("GET", "/-/ready"); got != 200 {
		t.Errorf("/-/ready after Set = %d, want 200", got)
	}
}

// TestServeRefusesABadWebConfig: a web config that does not validate is
// an error naming the file, and the listeners are closed.
func TestServeRefusesABadWebConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(path, []byte("tls_server_config: {cert_file: /nonexistent}\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = Serve(t.Context(), []net.Listener{l}, http.NotFoundHandler(), Listen{ConfigFile: path}, DefaultTimeouts, time.Second, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "web config "+path) {
		t.Errorf("Serve = %v, want an error naming %s", err, path)
	}
	if _, err := l.Accept(); err == nil {
		t.Error("the listener is still open")
	}
}
