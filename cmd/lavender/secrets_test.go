package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/notify"
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
func (s *secretSweep) request(p *inProcess, method, path, body, user, pass string) int {
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
	stdLogs := &testkit.SyncBuffer{}
	stdLogger, _ := app.NewLogger("debug", "logfmt", stdLogs)
	t.Cleanup(app.RouteStdLog(stdLogger))
	// okBark knows the marker and "k"; its 400 for any other key quotes it.
	okBark := barktest.New(t, secretMarker, "k")
	good := okBark.Template(secretMarker) + "\n"
	var failing strings.Builder
	failing.WriteString(good)
	failing.WriteString(barktest.DownURL(t) + "/" + secretMarker + "/$0?token=" + secretMarker + "\n")
	failing.WriteString(barktest.NewTLS(t, secretMarker).Template(secretMarker) + "?token=" + secretMarker + "\n")
	// Bark failing in every way it can answer, each quoting what it was
	// sent where a real one might: bark-server's errors quote the path,
	// its 500 an APNs device token; a page that is not Bark's JSON; a
	// server that keeps talking on the idle connection (net/http then
	// quotes it through the standard log).
	elsewhere := barktest.New(t, secretMarker) // where the redirect points
	for _, fault := range []barktest.Fault{
		barktest.Hang(), barktest.EchoPath(500), barktest.EchoPath(400), barktest.Reset(),
		barktest.Redirect(http.StatusFound, elsewhere.URL),
		barktest.PlainText(200, "<html>you asked for /"+secretMarker+"/hello</html>"),
		barktest.Status(500, `push failed: Post "https://api.push.apple.com/3/device/`+apnsMarker+`": /`+secretMarker+`/hello`),
		barktest.IdleTalk(),
	} {
		bark := barktest.New(t, secretMarker)
		bark.SetFault(fault)
		failing.WriteString(bark.Template(secretMarker) + "?token=" + secretMarker + "\n")
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
	encryptedFailing := barktest.New(t, secretMarker)
	encryptedFailing.SetFault(barktest.EchoPath(500))
	failing.WriteString(encrypted + encryptedFailing.Template(secretMarker) + "\n")

	setups := map[string]string{
		"succeeding": barktest.ConfigDir(t, map[string]string{"phone.bark.env": good + encrypted + good}),
		"failing":    barktest.ConfigDir(t, map[string]string{"phone.bark.env": failing.String()}),
		"bad config": barktest.ConfigDir(t, map[string]string{"phone.bark.env": good, "bad.bark.env": badLines}),
	}
	// A readable file gets the permission warning, which names the file only.
	os.Chmod(filepath.Join(setups["failing"], "phone.bark.env"), 0o644)

	// Basic auth whose password is the marker.
	webConfig := testkit.WriteWebConfig(t, testkit.WebConfig{Users: map[string]string{"trainer": secretMarker}})
	passwordFile := filepath.Join(t.TempDir(), "password")
	os.WriteFile(passwordFile, []byte(secretMarker+"\n"), 0o600)

	highSwap := testkit.SwapProcfs(t, 0.90)
	webhooks := []string{
		string(testkit.SwapAlertWebhook(1)),
		string(testkit.SwapAlertWebhook(1)), // a duplicate
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
				args = append(args, "--path.procfs="+highSwap, "--watchdog.interval=50ms", "--watchdog.repeat=100ms")
			}
			// A bad config starts too: the bad lines are logged by
			// file:line and the good targets serve.
			p := startInProcess(t, nil, args...)
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
			testkit.WaitFor(t, 20*time.Second, func() bool {
				return strings.Count(p.logs.String(), "late.bark.env") >= 2
			}, "the SIGHUP reload")
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
	p := startInProcess(t, nil, "exporter", "--path.procfs="+highSwap, "--runlog.dir="+logDir, "--web.config.file="+webConfig)
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
	for _, p := range elsewhere.Pushes() {
		s.add("a request that followed a redirect", p.Method+" "+p.RequestURI, p.Header)
	}
	if n := elsewhere.Count(); n != 0 {
		t.Errorf("a push followed a redirect %d times", n)
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
		"failed: redirect", "failed: not-bark", "/3/device/<redacted>", "Unsolicited response", "<redacted>: unsolicited bytes",
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

// TestStdLogGoesThroughTheScrubbingLogger: net/http writes to the standard
// log package, which bypasses lavender's logger unless routed through it.
func TestStdLogGoesThroughTheScrubbingLogger(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	logger, err := app.NewLogger("debug", "logfmt", logs)
	if err != nil {
		t.Fatal(err)
	}
	restore := app.RouteStdLog(logger)
	t.Cleanup(restore)
	talker := barktest.New(t, secretMarker)
	talker.SetFault(barktest.IdleTalk())
	dir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": talker.Template(secretMarker) + "\n"})
	loaded, err := delivery.LoadTargets(dir, nil)
	if err != nil || len(loaded.Notifiers) != 1 {
		t.Fatal(loaded, err)
	}
	if res := delivery.SendEach(t.Context(), loaded.Notifiers, 10*time.Second, func(notify.Notifier) notify.Message { return notify.Message{Text: "hello"} }); len(res) != 1 || res[0].Err != nil {
		t.Fatalf("push: %v", res)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return strings.Contains(logs.String(), "Unsolicited response")
	}, "net/http's complaint in lavender's log")
	if got := logs.String(); strings.Contains(got, secretMarker) || !strings.Contains(got, "<redacted>: unsolicited bytes") || !strings.Contains(got, "level=WARN") {
		t.Errorf("log:\n%s", got)
	}
}

// TestBarkEnvPermissionWarning: a target file others can read is warned
// about at start-up by every command that loads targets; a 0600 one is not.
func TestBarkEnvPermissionWarning(t *testing.T) {
	bark := barktest.New(t)
	const warning = "readable by group or others"
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o600, 0o400} {
		t.Run(fmt.Sprintf("%04o", mode), func(t *testing.T) {
			t.Parallel() // each its own files
			barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.Template(barktest.Key) + "\n"})
			if err := os.Chmod(filepath.Join(barkDir, "phone.bark.env"), mode); err != nil {
				t.Fatal(err)
			}
			wantWarning := mode&0o044 != 0
			for _, args := range [][]string{
				testkit.QuietServeArgs(t, barkDir, t.TempDir()),
				{"bridge", "--web.listen-address=127.0.0.1:0", "--bark.config-dir=" + barkDir, "--runlog.dir=" + t.TempDir()},
			} {
				command := startInProcess(t, nil, args...)
				testkit.WaitReady(t, nil, command.base, "", "")
				if err := command.stop(); err != nil {
					t.Fatal(err)
				}
				logs := command.logs.String()
				if got := strings.Contains(logs, warning) && strings.Contains(logs, "chmod 600") && strings.Contains(logs, "phone.bark.env"); got != wantWarning {
					t.Errorf("%s with mode %04o: warning %v, want %v:\n%s", args[0], mode, got, wantWarning, logs)
				}
			}
			stdout, stderr, err := runCLI(t, "bark", "check", "--bark.config-dir="+barkDir)
			if err != nil {
				t.Fatalf("bark check: %v %s", err, stderr)
			}
			if got := strings.Contains(stderr, warning); got != wantWarning {
				t.Errorf("bark check with mode %04o: warning %v, want %v: %q %q", mode, got, wantWarning, stdout, stderr)
			}
		})
	}
}
