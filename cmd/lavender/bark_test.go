package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

func TestBarkSend(t *testing.T) {
	// A variable of the user's own that happens to share the name a --test
	// flag would read from the environment changes nothing.
	t.Setenv("LAVENDER_TEST", "yes")
	bark := barktest.New(t)
	dir := barktest.ConfigDir(t, map[string]string{
		"a.bark.env": bark.URL + "/KEY/$0\n",
		"b.bark.env": "# wrong key\n" + bark.URL + "/SECRETKEY123/$0\n",
	})
	out, stderr, err := runCLI(t, "bark", "send", "--bark.config-dir", dir, "hello", "a/b+c")
	if err != nil {
		t.Fatalf("bark send: %v\n%s", err, stderr)
	}
	if out != "a.bark.env:1 ok\nb.bark.env:2 failed: HTTP 400\n" {
		t.Errorf("stdout %q", out)
	}
	if !strings.Contains(stderr, "[bark] b.bark.env:2 failed: HTTP 400") || strings.Contains(stderr+out, "SECRETKEY123") {
		t.Errorf("stderr %q", stderr)
	}
	var uris []string
	for _, p := range bark.Pushes() {
		uris = append(uris, p.RequestURI)
	}
	if len(uris) != 2 || !slices.Contains(uris, "/KEY/hello%20a%2Fb%2Bc?level=passive&isArchive=0") {
		t.Errorf("Bark got %q", uris)
	}

	// Every target failing is an error, and so is having none.
	dir = barktest.ConfigDir(t, map[string]string{"b.bark.env": bark.URL + "/SECRETKEY123/$0\n"})
	out, _, err = runCLI(t, "bark", "send", "--bark.config-dir", dir, "hello")
	if err == nil || out != "b.bark.env:1 failed: HTTP 400\n" || !strings.Contains(err.Error(), "every target failed") {
		t.Errorf("all failed: %q, %v", out, err)
	}
	if _, _, err := runCLI(t, "bark", "send", "--bark.config-dir", barktest.ConfigDir(t, nil), "hello"); err == nil || !strings.Contains(err.Error(), "bark send: no targets (*.bark.env or *.ntfy.env files)") {
		t.Errorf("no targets: %v", err)
	}
	if _, _, err := runCLI(t, "bark", "send", "--bark.config-dir", dir, " "); err == nil || !strings.Contains(err.Error(), "message is empty") {
		t.Errorf("empty message: %v", err)
	}
}

func TestBarkCheck(t *testing.T) {
	dir := barktest.ConfigDir(t, map[string]string{
		"a.bark.env": "https://api.day.app/SECRETKEY123/$0\n\nhttp://bark.lan:8080/SECRETKEY123/$0?level=active\n",
	})
	out, _, err := runCLI(t, "bark", "check", "--bark.config-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if out != "a.bark.env:1 ok (api.day.app)\na.bark.env:3 ok (bark.lan:8080)\n2 Bark targets in 1 file\n" {
		t.Errorf("stdout %q", out)
	}

	bad := barktest.ConfigDir(t, map[string]string{
		"a.bark.env": "https://api.day.app/SECRETKEY123/\nftp://SECRETKEY123/$0\n",
	})
	out, stderr, err := runCLI(t, "bark", "check", "--bark.config-dir", bad)
	// Each bad line is said once, in the report; the error only counts them.
	if err == nil || err.Error() != "bark check: 2 bad lines" ||
		strings.Count(out+stderr, "a.bark.env:1: no $0 placeholder") != 1 || strings.Count(out+stderr, "a.bark.env:2: not an http(s) URL") != 1 {
		t.Errorf("bad config: %v\nstdout %q\nstderr %q", err, out, stderr)
	}
	if strings.Contains(out+stderr+err.Error(), "SECRETKEY123") {
		t.Error("bark check printed the key")
	}

	// One bad line hides none of the good ones: every line has its result,
	// in file and line order.
	mixed := barktest.ConfigDir(t, map[string]string{
		"a.bark.env": "https://api.day.app/SECRETKEY123/$0\nhttps://api.day.app/SECRETKEY123/\nhttp://bark.lan:8080/SECRETKEY123/$0\n",
		"b.bark.env": "https://api.day.app/YOUR_DEVICE_KEY/$0\n",
	})
	out, _, err = runCLI(t, "bark", "check", "--bark.config-dir", mixed)
	want := "a.bark.env:1 ok (api.day.app)\n" +
		"a.bark.env:2: no $0 placeholder for the message\n" +
		"a.bark.env:3 ok (bark.lan:8080)\n" +
		"b.bark.env:1: not configured: replace YOUR_DEVICE_KEY with your Bark device key\n" +
		"2 Bark targets in 2 files, 2 bad lines\n"
	if out != want || err == nil {
		t.Errorf("mixed config: %v\n got %q\nwant %q", err, out, want)
	}
	if _, _, err := runCLI(t, "bark", "check", "--bark.config-dir", barktest.ConfigDir(t, nil)); err == nil {
		t.Error("an empty config dir passed the check")
	}
}

// TestBarkSendSaysWhatItSaw: a template that reaches a web server but not
// Bark's push route (bark-server's GET / answers a plain "ok") fails, and
// bark send says what came back instead of Bark's JSON.
func TestBarkSendSaysWhatItSaw(t *testing.T) {
	notBark := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved/SAWKEY12345/hello" {
			http.Redirect(w, r, "http://other.example/SAWKEY12345/hello", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok")
	}))
	t.Cleanup(notBark.Close)
	dir := barktest.ConfigDir(t, map[string]string{
		"a.bark.env": notBark.URL + "/?body=$0&key=SAWKEY12345\n" + notBark.URL + "/moved/SAWKEY12345/$0\n",
	})
	out, stderr, err := runCLI(t, "bark", "send", "--bark.config-dir", dir, "hello")
	if err == nil || !strings.Contains(err.Error(), "every target failed") {
		t.Errorf("err = %v", err)
	}
	want := "a.bark.env:1 failed: not-bark (saw HTTP 200, text/plain; charset=utf-8, body \"ok\")\n" +
		"a.bark.env:2 failed: redirect (saw HTTP 302 to http://other.example)\n"
	if out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if strings.Contains(out+stderr, "SAWKEY12345") {
		t.Errorf("the key leaked:\n%s\n%s", out, stderr)
	}
}

// TestRunLogDropsFormatChars: a run header or an entry with a bidi override
// reaches neither the run log file nor `runlog show` with it.
func TestRunLogDropsFormatChars(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	if _, _, err := runCLI(t, "runlog", "new", "--runlog.dir", dir, "--header", "model=exe.\u202Egnp\u2066x\u200E"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "runlog", "append", "--runlog.dir", dir, "NOTE", "a\u202Db\u2069c\uFEFF"); err != nil {
		t.Fatal(err)
	}
	shown, _, err := runCLI(t, "runlog", "show", "--runlog.dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	path, err := runlog.CurrentPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, s := range []string{shown, string(data)} {
		if strings.ContainsFunc(s, func(r rune) bool { return unicode.Is(unicode.Cf, r) }) {
			t.Errorf("a format character reached the run log: %q", s)
		}
		if !strings.Contains(s, "model=exe.gnpx") || !strings.Contains(s, "NOTE abc") {
			t.Errorf("run log %q lacks the cleaned texts", s)
		}
	}
}

// TestShippedExampleIsNotConfigured: `cp .bark.env.example phone.bark.env`
// and nothing else must not pass the check, and once the key is in, bark
// check prints the line the README's Quick start promises.
func TestShippedExampleIsNotConfigured(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "..", ".bark.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	dir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": string(example)})
	out, stderr, err := runCLI(t, "bark", "check", "--bark.config-dir", dir)
	if err == nil || !strings.Contains(out, "phone.bark.env:7: not configured") || strings.Contains(out, " ok") {
		t.Errorf("bark check of the untouched example: %q %q %v", out, stderr, err)
	}

	// bark send says the same, not that there is no file.
	_, _, err = runCLI(t, "bark", "send", "--bark.config-dir", dir, "hello")
	if err == nil || !strings.Contains(err.Error(), "phone.bark.env:7: not configured: replace YOUR_DEVICE_KEY with your Bark device key") || strings.Contains(err.Error(), "no Bark targets") {
		t.Errorf("bark send with the untouched example: %v", err)
	}

	configured := strings.ReplaceAll(string(example), "YOUR_DEVICE_KEY", "Xy12AbCdEfGhIjKlMnOpQr")
	dir = barktest.ConfigDir(t, map[string]string{"phone.bark.env": configured})
	out, _, err = runCLI(t, "bark", "check", "--bark.config-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(out, "\n")
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var promised bool
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.Contains(line, "lavender check") && strings.Contains(line, "#") {
			promised = true
			if _, comment, _ := strings.Cut(line, "#"); !strings.Contains(comment, first) {
				t.Errorf("README promises %q, but bark check of the configured example prints %q", strings.TrimSpace(comment), first)
			}
		}
	}
	if !promised {
		t.Error("README's Quick start shows no `lavender check  # <what it prints>` line")
	}
}

// TestBadBarkLineDoesNotStopServe: a typo in one *.bark.env line must not
// take down the metrics and the watchdog (under systemd's Restart=on-failure
// it would loop): serve and bridge start with the good targets, report the
// bad line as file:line: reason, say so in the reload gauge, and exit 0.
// bark check keeps failing on the same files.
func TestBadBarkLineDoesNotStopServe(t *testing.T) {
	bark := barktest.New(t)
	dir := barktest.ConfigDir(t, map[string]string{
		"phone.bark.env": bark.URL + "/KEY/$0\n",
		"typo.bark.env":  "# a typo\nhttps://api.day.app/SECRETKEY123/\n",
	})
	for _, cmd := range []string{"serve", "bridge"} {
		t.Run(cmd, func(t *testing.T) {
			args := []string{cmd, "--web.listen-address=127.0.0.1:0", "--bark.config-dir=" + dir, "--runlog.dir=" + t.TempDir()}
			if cmd == "serve" {
				args = testkit.QuietServeArgs(t, dir, t.TempDir())
			}
			command := startInProcess(t, nil, args...)
			base := command.base
			testkit.WaitReady(t, nil, base, "", "")
			m := testkit.Scrape(t, nil, base+"/metrics")
			if v := m.MustValue(t, "lavender_bark_config_last_reload_successful", nil); v != 0 {
				t.Errorf("last_reload_successful = %v, want 0", v)
			}
			if v := m.MustValue(t, "lavender_bark_targets", nil); v != 1 {
				t.Errorf("lavender_bark_targets = %v, want 1", v)
			}
			if code, body := testkit.MustDo(t, nil, "POST", base+"/webhook", testkit.SwapAlertWebhook(1), "", ""); code != 200 || !strings.Contains(body, "pushed=1") {
				t.Errorf("webhook = %d %q", code, body)
			}
			if err := command.stop(); err != nil {
				t.Errorf("%s stopped with %v, want a clean stop (exit 0)", cmd, err)
			}
			logs := command.logs.String()
			if !strings.Contains(logs, "typo.bark.env:2: no $0 placeholder") || strings.Contains(logs, "SECRETKEY123") {
				t.Errorf("log:\n%s", logs)
			}
		})
	}
	if out, _, err := runCLI(t, "bark", "check", "--bark.config-dir", dir); err == nil || !strings.Contains(out, "typo.bark.env:2: no $0 placeholder") {
		t.Errorf("bark check = %v, stdout %q; want the bad line", err, out)
	}
}

// TestBarkSendTestAndCheckEncryption: `bark check` names an encrypted
// target's algorithm, `bark send --test` sends each target the text that
// names its encryption (the phone shows it only if the key matches), and
// neither prints the key.
func TestBarkSendTestAndCheckEncryption(t *testing.T) {
	bark := barktest.New(t, "KEY", "CLEAR")
	const key = "KEY4SECRET4KEY4SECRET4KEY4SECRET" // 32 characters
	dir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.Template("CLEAR") + "\n" +
		"BARK_ENCRYPTION=aes-256-gcm:" + key + "\n" + bark.Template("KEY") + "\n"})
	out, stderr, err := runCLI(t, "bark", "check", "--bark.config-dir", dir)
	host := strings.TrimPrefix(bark.URL, "http://")
	if err != nil || out != "phone.bark.env:1 ok ("+host+")\nphone.bark.env:3 ok ("+host+", aes-256-gcm)\n2 Bark targets in 1 file\n" {
		t.Errorf("bark check: %q %q %v", out, stderr, err)
	}
	out, stderr, err = runCLI(t, "bark", "send", "--test", "--bark.config-dir", dir)
	if err != nil || out != "phone.bark.env:1 ok\nphone.bark.env:3 ok\n" || strings.Contains(out+stderr, key) {
		t.Errorf("bark send --test: %q %q %v", out, stderr, err)
	}
	// The targets are pushed to at once: the order of arrival is the
	// network's.
	var texts []string
	for _, p := range bark.Pushes() {
		if p.Encrypted() {
			texts = append(texts, "encrypted "+barktest.AppDecrypt(t, "gcm", key, p.IV, p.Ciphertext)["body"])
			continue
		}
		texts = append(texts, p.Body)
	}
	slices.Sort(texts)
	// Each names its target's encryption and is as long as the longest
	// push, so the test encrypts and sends what a real push does.
	if len(texts) != 2 || !strings.HasPrefix(texts[0], "[lavender-2] test push (not encrypted) at the longest a push can be: swap 54% full") ||
		!strings.HasPrefix(texts[1], "encrypted [lavender-2] test push (aes-256-gcm) at the longest") {
		t.Errorf("pushes %q", texts)
	}
	const maxPush = 512 // bark.MaxMessageBytes; the server here is named bark
	for _, text := range texts {
		if n := len(strings.TrimPrefix(text, "encrypted ")); n != maxPush || !strings.HasSuffix(text, "…") {
			t.Errorf("test push of %d bytes, want the longest, %d: %q", n, maxPush, text)
		}
	}
	if _, _, err := runCLI(t, "bark", "send", "--test", "--bark.config-dir", dir, "hello"); err == nil {
		t.Error("--test with a message: no error")
	}
}
