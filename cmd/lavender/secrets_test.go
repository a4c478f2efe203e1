package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"lavender/barkbridge"
)

// secretMarker is the device key (and the basic-auth password) of the
// secrets sweep; nothing lavender prints, logs, serves or writes may hold it.
const secretMarker = "SECRETMARKER9f3a"

// apnsMarker is an APNs device token, which bark-server quotes in its 500
// answer; it is as secret as the key.
const apnsMarker = "9f3a" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"

// secretSweep collects everything a user or an attacker could read.
type secretSweep struct {
	t    *testing.T
	seen strings.Builder
}

func (s *secretSweep) add(what string, v ...any) {
	fmt.Fprintf(&s.seen, "==> %s\n", what)
	for _, x := range v {
		fmt.Fprintf(&s.seen, "%v\n", x)
	}
}

// cli runs a one-shot command at debug level, as a user would.
func (s *secretSweep) cli(args ...string) {
	stdout, stderr, err := runCLI(s.t, append([]string{"--log.level=debug"}, args...)...)
	// The arguments are the test's input, not lavender's output.
	s.add("lavender "+strings.ReplaceAll(strings.Join(args, " "), secretMarker, "<marker>"), stdout, stderr, err)
}

// files adds every file under dir.
func (s *secretSweep) files(dir string) {
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			data, _ := os.ReadFile(path)
			s.add("file "+filepath.Base(path), string(data))
		}
		return nil
	})
}

// request sends one request and adds the whole answer, headers included.
func (s *secretSweep) request(p *hProc, method, path, body, user, pass string) int {
	req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		s.add(method+" "+path, err)
		return 0
	}
	defer resp.Body.Close()
	var b strings.Builder
	resp.Header.Write(&b)
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	s.add(fmt.Sprintf("%s %s -> %d", method, path, resp.StatusCode), b.String(), string(data))
	return resp.StatusCode
}

// TestSecretsNeverLeak runs every command and endpoint with secretMarker as
// the Bark device key (in the path, the query and as a URL password) and as
// the basic-auth password, in set-ups where Bark accepts, fails in every
// way, and where the config is wrong, and looks for the marker in all
// output, logs (at debug level), metrics, HTTP answers and files written.
func TestSecretsNeverLeak(t *testing.T) {
	s := &secretSweep{t: t}
	// net/http speaks through the standard log package: route it as run()
	// does, into what the sweep reads.
	stdLogs := &lockedBuffer{}
	stdLogger, _ := newLogger("debug", "logfmt", stdLogs)
	t.Cleanup(routeStdLog(stdLogger))
	okBark := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := 200
		if !strings.HasPrefix(r.URL.Path, "/"+secretMarker+"/") && !strings.HasPrefix(r.URL.Path, "/k/") {
			code = 400
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"code": code, "message": "device key " + r.URL.Path, "timestamp": 1})
	}))
	t.Cleanup(okBark.Close)
	good := okBark.URL + "/" + secretMarker + "/$0\n"
	var failing strings.Builder
	failing.WriteString(good)
	for _, fault := range []string{"down", "hang", "500", "400", "reset", "tls"} {
		failing.WriteString(hFaultyBark(t, fault).url + "/" + secretMarker + "/$0?token=" + secretMarker + "\n")
	}
	// A server that redirects elsewhere, one that keeps talking on the idle
	// connection (net/http then quotes it through the standard log), one
	// that answers a page that is not Bark's JSON, and bark-server's 500
	// quoting an APNs device token.
	followed := &lockedBuffer{}
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(followed, "a redirect was followed: %s %v\n", r.URL, r.Header)
	}))
	t.Cleanup(elsewhere.Close)
	odd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/redirect/"):
			http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/page/"):
			io.WriteString(w, "<html>you asked for "+r.URL.Path+"</html>")
		default:
			w.WriteHeader(500)
			json.NewEncoder(w).Encode(map[string]any{"code": 500, "timestamp": 1,
				"message": `push failed: Post "https://api.push.apple.com/3/device/` + apnsMarker + `": ` + r.URL.Path})
		}
	}))
	t.Cleanup(odd.Close)
	for _, prefix := range []string{odd.URL + "/redirect", odd.URL + "/page", odd.URL + "/apns", idleTalker(t)} {
		failing.WriteString(prefix + "/" + secretMarker + "/$0?token=" + secretMarker + "\n")
	}
	failing.WriteString(okBark.URL + "/" + secretMarker + "x/$0\n") // unknown key: the 400 quotes it
	failing.WriteString("http://user:" + secretMarker + "@" + strings.TrimPrefix(okBark.URL, "http://") + "/k/$0\n")
	badLines := "ftp://" + secretMarker + "/$0\nhttps://h/" + secretMarker + "\nhttps://h/" + secretMarker + "/$0#" + secretMarker + "\n" +
		// An encryption key of the wrong length, one with the halves
		// swapped, and a template under them.
		"BARK_ENCRYPTION=aes-256-gcm:" + secretMarker + "\nBARK_ENCRYPTION=" + secretMarker + ":aes-128-gcm\n" + good
	// The marker is also an encryption key (16 characters: AES-128), as
	// secret as the device key.
	encrypted := "BARK_ENCRYPTION=aes-128-gcm:" + secretMarker + "\n" + good + "BARK_ENCRYPTION=aes-128-cbc:" + secretMarker + "\n"
	failing.WriteString(encrypted + hFaultyBark(t, "500").url + "/" + secretMarker + "/$0\n")

	setups := map[string]string{
		"succeeding": barkConfigDir(t, map[string]string{"phone.bark.env": good + encrypted + good}),
		"failing":    barkConfigDir(t, map[string]string{"phone.bark.env": failing.String()}),
		"bad config": barkConfigDir(t, map[string]string{"phone.bark.env": good, "bad.bark.env": badLines}),
	}
	// A readable file gets the permission warning, which names the file only.
	os.Chmod(filepath.Join(setups["failing"], "phone.bark.env"), 0o644)

	// Basic auth whose password is the marker.
	hash, _ := bcrypt.GenerateFromPassword([]byte(secretMarker), bcrypt.MinCost)
	authDir := t.TempDir()
	webConfig := filepath.Join(authDir, "web.yml")
	os.WriteFile(webConfig, fmt.Appendf(nil, "basic_auth_users:\n  trainer: %s\n", hash), 0o600)
	passwordFile := filepath.Join(authDir, "password")
	os.WriteFile(passwordFile, []byte(secretMarker+"\n"), 0o600)

	highSwap := newFakeProcfs(t)
	highSwap.setSwap(swap32GiBinKB, 0.90)
	webhooks := []string{
		string(hSwapWebhook(1)),
		string(hSwapWebhook(1)), // a duplicate
		`{"version":"4","status":"resolved","alerts":[{"status":"resolved","labels":{"alertname":"SwapUsageHigh"},"annotations":{"swap_used_ratio":"0.2"},"startsAt":"2026-04-24T00:45:00Z","fingerprint":"ab"}]}`,
		`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"PhaseStalled","phase":"` + secretMarker[:6] + `"},"annotations":{"summary":"stalled"},"startsAt":"2026-04-24T00:45:00Z"}]}`,
		`{"version":"3"}`,
		`{not json`,
	}

	for _, name := range []string{"succeeding", "failing", "bad config"} {
		dir := setups[name]
		s.cli("bark", "check", "--bark.config-dir="+dir)
		s.cli("bark", "send", "--bark.config-dir="+dir, "--bark.timeout=500ms", "hello", "from", "the", "sweep")
		s.cli("bark", "send", "--test", "--bark.config-dir="+dir, "--bark.timeout=500ms")

		for _, cmd := range []string{"serve", "bridge"} {
			logDir := t.TempDir()
			args := []string{cmd, "--bark.config-dir=" + dir, "--runlog.dir=" + logDir, "--bark.timeout=500ms", "--bark.send-resolved"}
			if cmd == "serve" {
				args = append(args, "--path.procfs="+highSwap.dir, "--watchdog.interval=50ms", "--watchdog.repeat=100ms")
			}
			// A bad config starts too: the bad lines are logged by
			// file:line and the good targets serve.
			p := hStart(t, nil, args...)
			for _, w := range webhooks {
				s.request(p, "POST", "/webhook", w, "", "")
			}
			for _, r := range [][3]string{
				{"POST", "/-/reload", ""}, {"GET", "/webhook", ""}, {"GET", "/-/reload", ""},
				{"GET", "/", ""}, {"GET", "/-/healthy", ""}, {"GET", "/-/ready", ""},
				{"POST", "/api/v1/heartbeat", `{"phase":"Train","event":"start"}`},
				{"POST", "/api/v1/heartbeat", `{"phase":"Train","event":"end"}`},
				{"GET", "/api/v1/phases", ""}, {"POST", "/api/v1/runs", `{"header":"sweep"}`},
			} {
				s.request(p, r[0], r[1], r[2], "", "")
			}
			// A bad file appears: reload by API and by SIGHUP keep the old
			// targets and report the bad line by file:line.
			os.WriteFile(filepath.Join(dir, "late.bark.env"), []byte(badLines), 0o600)
			s.request(p, "POST", "/-/reload", "", "", "")
			syscall.Kill(os.Getpid(), syscall.SIGHUP)
			waitFor(t, "the SIGHUP reload", func() bool {
				return strings.Count(p.logs.String(), "late.bark.env") >= 2
			})
			os.Remove(filepath.Join(dir, "late.bark.env"))
			s.request(p, "GET", "/metrics", "", "", "")
			if err := p.stop(); err != nil {
				t.Fatal(err)
			}
			s.add(cmd+" "+name+" log", p.logs.String())
			s.files(logDir)
			s.cli("runlog", "show", "--runlog.dir="+logDir)
		}
	}

	// The exporter and the phase client, with the marker as the password.
	logDir := t.TempDir()
	p := hStart(t, nil, "exporter", "--path.procfs="+highSwap.dir, "--runlog.dir="+logDir, "--web.config.file="+webConfig)
	s.request(p, "GET", "/metrics", "", "trainer", secretMarker)
	s.request(p, "GET", "/metrics", "", "trainer", secretMarker+"wrong")
	s.cli("phase", "start", "Train", "--url", p.base, "--username", "trainer", "--password-file", passwordFile)
	s.cli("phase", "ping", "Train", "--url", p.base, "--username", "intruder", "--password-file", passwordFile)
	s.cli("phase", "end", "Train", "--url", p.base+"/nowhere", "--username", "trainer", "--password-file", passwordFile)
	s.cli("phase", "run", "Wrapped", "--url", p.base, "--username", "trainer", "--password-file", passwordFile, "--", "false")
	s.cli("phase", "start", "Train", "--url", "http://trainer:"+secretMarker+"@127.0.0.1:1")
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	s.add("exporter log", p.logs.String())
	s.files(logDir)
	s.cli("runlog", "show", "--runlog.dir="+logDir)
	s.cli("runlog", "path", "--runlog.dir="+logDir)
	s.cli("version")
	s.add("the standard log", stdLogs.String())
	s.add("requests that followed a redirect", followed.String())
	if followed.String() != "" {
		t.Errorf("a push followed a redirect:\n%s", followed)
	}

	all := s.seen.String()
	for _, line := range strings.Split(all, "\n") {
		if strings.Contains(line, secretMarker) || strings.Contains(line, apnsMarker) {
			t.Errorf("marker leaked: %s", line)
		}
	}
	// The sweep proves something only if the failures it covers happened.
	for _, want := range []string{
		"failed: connection refused", "failed: timeout", "failed: HTTP 500", "failed: HTTP 400",
		"failed: connection reset", "failed: tls", "phone.bark.env:1 ok", "bad.bark.env:1", "late.bark.env:1",
		"readable by group or others", "detail=", "-> 401", "-> 503", "-> 400", "exporter answered 401",
		"BARK swap 54% sent ok=", "BARK swap 90% sent ok=", "exporter URL carries credentials",
		"failed: redirect", "failed: not-bark", "/3/device/<redacted>", "Unsolicited response", "you sent /<redacted>/",
		"aes-128-gcm)", "aes-128-cbc)", "needs a key of exactly 32 characters", "unknown algorithm", "not loaded",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the sweep never saw %q", want)
		}
	}
	t.Logf("swept %d bytes of output, answers, logs and files", len(all))
}

// TestPhaseClientNeverFollowsRedirects: `lavender phase` sends the basic-auth
// password with every request, so a redirect from the exporter's address
// (same host, another port, or http instead of https) must not carry it on.
func TestPhaseClientNeverFollowsRedirects(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Header.Get("Authorization")+" "+r.Header.Get("Referer"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"name":"Train","status":"running"}`)
	}))
	t.Cleanup(other.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	passwordFile := filepath.Join(t.TempDir(), "password")
	os.WriteFile(passwordFile, []byte(secretMarker+"\n"), 0o600)

	_, stderr, err := runCLI(t, "phase", "start", "Train", "--url", redirector.URL, "--username", "trainer", "--password-file", passwordFile)
	if err == nil || !strings.Contains(err.Error(), "307") {
		t.Errorf("phase start through a redirect: err = %v", err)
	}
	if strings.Contains(fmt.Sprint(err)+stderr, secretMarker) {
		t.Errorf("the password leaked: %v %s", err, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 0 {
		t.Errorf("the redirect was followed: %q", reached)
	}
}

// idleTalker is a Bark stand-in that, after a good answer, keeps talking on
// the kept-alive connection and quotes the request path, key included. Go's
// HTTP client then prints `Unsolicited response received on idle HTTP
// channel starting with "HTTP/1.1 400 you sent /<key>/…"` through the
// standard log package.
func idleTalker(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					body := `{"code":200,"message":"success","timestamp":1}`
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
					time.Sleep(20 * time.Millisecond) // the client has put the connection back as idle
					fmt.Fprintf(c, "HTTP/1.1 400 you sent %s\r\n\r\n", req.URL.Path)
				}
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// TestStdLogGoesThroughTheScrubbingLogger: net/http writes to the standard
// log package, which bypasses lavender's logger unless routed through it.
func TestStdLogGoesThroughTheScrubbingLogger(t *testing.T) {
	logs := &lockedBuffer{}
	logger, err := newLogger("debug", "logfmt", logs)
	if err != nil {
		t.Fatal(err)
	}
	restore := routeStdLog(logger)
	t.Cleanup(restore)
	dir := barkConfigDir(t, map[string]string{"phone.bark.env": idleTalker(t) + "/" + secretMarker + "/$0\n"})
	bridge, err := barkbridge.New(barkbridge.Config{ConfigDir: dir}, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := bridge.Send(t.Context(), "hello"); len(res) != 1 || res[0].Err != nil {
		t.Fatalf("push: %v", res)
	}
	waitFor(t, "net/http's complaint in lavender's log", func() bool {
		return strings.Contains(logs.String(), "Unsolicited response")
	})
	if got := logs.String(); strings.Contains(got, secretMarker) || !strings.Contains(got, "you sent /<redacted>/") || !strings.Contains(got, "level=WARN") {
		t.Errorf("log:\n%s", got)
	}
}
