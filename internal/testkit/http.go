package testkit

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// Do sends one request and returns the status and the body. A body goes
// as Content-Type: application/json, as Alertmanager and `lavender phase`
// send theirs (lavender refuses any other type with 415). user "" sends no
// credentials; client nil is a plain client with a 30 s timeout. The
// answer is read to the end (at most 16 MiB).
func Do(client *http.Client, method, url string, body []byte, user, password string) (int, string, error) {
	if client == nil {
		client = &http.Client{Timeout: waitLimit}
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, string(data), err
}

// MustDo is Do that fails the test on a transport error; any status is
// returned.
func MustDo(t testing.TB, client *http.Client, method, url string, body []byte, user, password string) (int, string) {
	t.Helper()
	code, answer, err := Do(client, method, url, body, user, password)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return code, answer
}

// WaitReady polls base+"/-/ready" until it answers 200 (a serving command
// is ready: for serve, once its first sample is in).
func WaitReady(t testing.TB, client *http.Client, base, user, password string) {
	t.Helper()
	var last string
	ok := Poll(waitLimit, func() bool {
		code, body, err := Do(client, http.MethodGet, base+"/-/ready", nil, user, password)
		last = fmt.Sprintf("%d %.200q %v", code, body, err)
		return err == nil && code == http.StatusOK
	})
	if !ok {
		t.Fatalf("gave up after %v waiting for %s/-/ready to answer 200; last answer: %s", waitLimit, base, last)
	}
}

// FreeAddrs returns n distinct 127.0.0.1 addresses whose ports the kernel
// just handed out; all are held until the last is chosen, so no two are
// the same. Prefer --web.listen-address=127.0.0.1:0 and Command.Addr: an
// address from here is free only until another program takes it. Use it
// where the address must be known before the start (a config file that
// names it, a restart on the same port).
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testkit: %v", err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs
}
