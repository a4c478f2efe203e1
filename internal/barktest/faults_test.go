package barktest

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// get is a GET that returns the error instead of failing.
func get(client *http.Client, url string) (int, string, error) {
	return testkit.Do(client, http.MethodGet, url, nil, "", "")
}

// TestFaultAnswers: each fault that answers gives the status and body it
// promises, and the push is recorded with that answer.
func TestFaultAnswers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fault      Fault
		status     int
		body       string
		recordCode int
	}{
		{"none", nil, 200, `"code":200,"message":"success","timestamp":`, 200},
		{"500", Status(500, "push failed: APNs unreachable"), 500, `"code":500,"message":"push failed: APNs unreachable"`, 500},
		{"429", Status(429, "slow down"), 429, `"code":429`, 429},
		{"echo path", EchoPath(500), 500, `"message":"push failed: /KEY/secret%20text"`, 500},
		{"JSON code under HTTP 200", BarkCode(400, "push failed"), 200, `"code":400,"message":"push failed"`, 200},
		{"plain ok", PlainOK(), 200, "ok", 200},
		{"fail first, then Bark", FailFirst(0, Status(500, "x")), 200, `"code":200`, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t)
			s.SetFault(tc.fault)
			code, body, err := get(http.DefaultClient, s.URL+"/KEY/secret%20text")
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.status || !strings.Contains(body, tc.body) {
				t.Errorf("got %d %q, want %d with %q", code, body, tc.status, tc.body)
			}
			if tc.name == "plain ok" && body != "ok" {
				t.Errorf("plain body %q, want exactly ok", body)
			}
			p := s.WaitPushes(t, 1)[0]
			if p.Status != tc.recordCode || p.Body != "secret text" {
				t.Errorf("recorded status %d body %q", p.Status, p.Body)
			}
		})
	}
}

// TestFaultsThatDoNotAnswer: the transport-level faults end in the error a
// client sees from a real failure of that kind, and the push is still
// recorded, unanswered.
func TestFaultsThatDoNotAnswer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault Fault
		check func(error) bool
	}{
		{"hang", Hang(), func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"reset", Reset(), func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }},
		{"close", CloseConnection(), func(err error) bool { return errors.Is(err, io.EOF) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t)
			s.SetFault(tc.fault)
			// The deadline only ends the hang: no assertion is on time.
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/KEY/b", nil)
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("answered %d, want an error", resp.StatusCode)
			}
			if !tc.check(err) {
				t.Errorf("error %v is not the %s kind", err, tc.name)
			}
			if p := s.WaitPushes(t, 1)[0]; p.Status != 0 || p.Body != "b" {
				t.Errorf("recorded status %d body %q, want unanswered push of b", p.Status, p.Body)
			}
		})
	}
}

// TestHangEndsWithTheTest: a hanging request is released when the server
// closes, so cleanup never waits on it.
func TestHangEndsWithTheTest(t *testing.T) {
	s := New(t)
	s.SetFault(Hang())
	errc := make(chan error, 1)
	go func() {
		_, _, err := get(http.DefaultClient, s.URL+"/KEY/b")
		errc <- err
	}()
	s.WaitPushes(t, 1)
	select {
	case err := <-errc:
		t.Fatalf("the hanging request ended before Close: %v", err)
	default:
	}
	s.Close()
	<-errc // any outcome; it only must end
}

// TestHoldAnswersOnRelease: a held push is recorded unanswered, and
// answered as Bark does once released.
func TestHoldAnswersOnRelease(t *testing.T) {
	s := New(t)
	release := make(chan struct{})
	s.SetFault(Hold(release))
	type answer struct {
		code int
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		code, _, err := get(http.DefaultClient, s.URL+"/"+Key+"/b")
		done <- answer{code, err}
	}()
	if p := s.WaitPushes(t, 1)[0]; p.Status != 0 {
		t.Fatalf("held push recorded with status %d, want none yet", p.Status)
	}
	select {
	case a := <-done:
		t.Fatalf("answered before the release: %+v", a)
	default:
	}
	close(release)
	if a := <-done; a.err != nil || a.code != 200 || s.Pushes()[0].Status != 200 {
		t.Errorf("after the release: %+v, recorded %d; want 200", a, s.Pushes()[0].Status)
	}
}

func TestDownURL(t *testing.T) {
	_, _, err := get(http.DefaultClient, DownURL(t)+"/KEY/b")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("got %v, want connection refused", err)
	}
}

// TestUntrustedTLS: NewTLS's certificate is refused by a default client,
// and accepted by one that trusts CertPool.
func TestUntrustedTLS(t *testing.T) {
	s := NewTLS(t)
	if !strings.HasPrefix(s.URL, "https://127.0.0.1:") {
		t.Fatalf("URL %s", s.URL)
	}
	_, _, err := get(http.DefaultClient, s.URL+"/KEY/b")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("default client: %v, want an unknown-authority error", err)
	}
	if code, _, err := get(s.Client(), s.URL+"/KEY/b"); err != nil || code != 200 {
		t.Errorf("trusting client: %d %v", code, err)
	}
	if s.CertPool() == nil || New(t).CertPool() != nil {
		t.Error("CertPool: want a pool for TLS only")
	}
	// Reset works on TLS connections too.
	s.SetFault(Reset())
	if _, _, err := get(s.Client(), s.URL+"/KEY/b"); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reset over TLS: %v", err)
	}
}

// TestRedirect: the redirected-to server records whether it was reached
// and the Referer the client sent; a client that does not follow leaves it
// untouched.
func TestRedirect(t *testing.T) {
	s, elsewhere := New(t), New(t)
	s.SetFault(Redirect(http.StatusTemporaryRedirect, elsewhere.URL))

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(s.URL + "/KEY/b?level=passive")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 307 || resp.Header.Get("Location") != elsewhere.URL+"/KEY/b?level=passive" {
		t.Errorf("answer %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := elsewhere.Count(); n != 0 {
		t.Fatalf("a client that does not follow reached the target %d times", n)
	}

	if code, _, err := get(http.DefaultClient, s.URL+"/KEY/b?level=passive"); err != nil || code != 200 {
		t.Fatalf("following client: %d %v", code, err)
	}
	p := elsewhere.WaitPushes(t, 1)[0]
	if p.Referer != s.URL+"/KEY/b?level=passive" || p.Level != "passive" {
		t.Errorf("target recorded Referer %q level %q", p.Referer, p.Level)
	}
	if got := s.Pushes(); len(got) != 2 || got[0].Status != 307 {
		t.Errorf("redirecting server recorded %+v", got)
	}
}

// TestIdleTalk: after its answer, the server writes bytes beginning with
// the device key on the idle keep-alive connection, and Go's HTTP client
// reports them through the standard logger, which is what lavender must
// keep off its stderr.
func TestIdleTalk(t *testing.T) {
	s := New(t, "SECRETKEY")
	s.SetFault(IdleTalk())

	// On the wire: a full answer, then the unsolicited bytes.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /SECRETKEY/b HTTP/1.1\r\nHost: bark\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"message":"success"`) {
		t.Errorf("answer %d %q", resp.StatusCode, body)
	}
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "SECRETKEY: unsolicited") {
		t.Errorf("after the answer: %q %v", line, err)
	}

	// Through Go's client, which logs them with log.Printf.
	var stdlog testkit.SyncBuffer
	log.SetOutput(&stdlog)
	defer log.SetOutput(log.Writer())
	client := &http.Client{Transport: &http.Transport{}}
	if code, _, err := get(client, s.URL+"/SECRETKEY/b"); err != nil || code != 200 {
		t.Fatalf("client: %d %v", code, err)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return s.IdleTalks() == 2 }, "the second idle talk")
	testkit.WaitFor(t, 30*time.Second, func() bool { return strings.Contains(stdlog.String(), "Unsolicited response") }, "Go's client to log the talk")
	if !strings.Contains(stdlog.String(), "SECRETKEY") {
		t.Errorf("the logged talk lacks the key: %q", stdlog.String())
	}
}

// TestFailFirstPerKey: each key's FailFirst counts its own pushes; other
// keys follow the server's fault.
func TestFailFirstPerKey(t *testing.T) {
	s := New(t, "PHONE", "TABLET", "WATCH")
	s.SetKeyFault("PHONE", FailFirst(2, Status(500, "push failed")))
	s.SetKeyFault("TABLET", FailFirst(1, Status(500, "push failed")))
	for range 3 {
		for _, key := range []string{"PHONE", "TABLET", "WATCH"} {
			get(http.DefaultClient, s.URL+"/"+key+"/b")
		}
	}
	got := map[string][]int{}
	for _, p := range s.Pushes() {
		got[p.DeviceKey] = append(got[p.DeviceKey], p.Status)
	}
	for key, want := range map[string][]int{"PHONE": {500, 500, 200}, "TABLET": {500, 200, 200}, "WATCH": {200, 200, 200}} {
		if g := got[key]; len(g) != 3 || g[0] != want[0] || g[1] != want[1] || g[2] != want[2] {
			t.Errorf("%s answered %v, want %v", key, g, want)
		}
	}
	s.SetFault(Status(503, "down"))
	s.SetKeyFault("PHONE", nil)
	if code, _, _ := get(http.DefaultClient, s.URL+"/PHONE/b"); code != 503 {
		t.Errorf("after SetKeyFault(nil), PHONE got %d, want the server's fault 503", code)
	}
	if code, _, _ := get(http.DefaultClient, s.URL+"/TABLET/b"); code != 200 {
		t.Errorf("TABLET got %d, want its own fault's 200", code)
	}
}

func TestConfigDir(t *testing.T) {
	s := New(t)
	dir := ConfigDir(t, map[string]string{"phone.bark.env": s.Template(Key) + "\n"})
	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("dir: %v %v", info, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "phone.bark.env"))
	if err != nil || string(data) != s.URL+"/KEY/$0\n" {
		t.Errorf("file: %q %v", data, err)
	}
	if info, _ := os.Stat(filepath.Join(dir, "phone.bark.env")); info.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v", info.Mode())
	}
}
