package ntfy

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/ntfytest"
	"github.com/lavender-ml/lavender/notify"
)

// TestSecretsSweep pushes through every failure path with known
// credentials and reads everything lavender could show of them: the
// error's text, class, Detail and Saw, the error, Target and Notifier under
// every fmt verb, and slog's text and JSON output. No credential, in any
// form it was sent, may appear.
func TestSecretsSweep(t *testing.T) {
	const (
		password = "correct-horse-battery"
		user     = "phil"
	)
	basic := "cGhpbDpjb3JyZWN0LWhvcnNlLWJhdHRlcnk=" // base64("phil:correct-horse-battery")
	secrets := []string{testToken, password, basic, strings.TrimRight(basic, "=")}

	srv := ntfytest.New(t)
	other := ntfytest.New(t)
	t.Setenv("LAVENDER_TEST_NTFY_PW", password)
	dir := ntfytest.ConfigDir(t, map[string]string{
		"p.ntfy.env": strings.Join([]string{
			srv.TopicURL("t") + " token_file=tok",
			srv.TopicURL("t") + " user=" + user + " password_env=LAVENDER_TEST_NTFY_PW",
			ntfytest.DownURL(t) + "/t token_file=tok",
		}, "\n"),
		"tok": testToken,
	})
	res, err := LoadTargets(dir)
	if err != nil || len(res.Targets) != 3 {
		t.Fatalf("LoadTargets: %v, %d targets", err, len(res.Targets))
	}
	live, down := res.Targets[:2], res.Targets[2]

	faults := map[string]ntfytest.Fault{
		"ntfy's answer":        nil,
		"400 echo":             ntfytest.EchoRequest(40000),
		"401 echo":             ntfytest.EchoRequest(40101),
		"403 echo":             ntfytest.EchoRequest(40301),
		"429 echo":             ntfytest.EchoRequest(42901),
		"daily quota echo":     ntfytest.EchoRequest(42908),
		"500 echo":             ntfytest.EchoRequest(50001),
		"503 echo":             ntfytest.EchoRequest(50301),
		"error text":           ntfytest.ErrorText(40101, "bad token "+testToken+" and "+password+" for "+basic),
		"another user's token": ntfytest.ErrorText(40101, "token tk_zzzzzzzzzzzzzzzzzzzzzzzzzzzzz expired"),
		"page quoting it":      ntfytest.Page(200, "text/plain; "+testToken, "Authorization: Bearer "+testToken+" Basic "+basic+" "+password),
		"error page":           ntfytest.Page(502, "text/html", "<pre>Bearer "+testToken+"</pre>"),
		"redirect to it":       ntfytest.Redirect(http.StatusFound, "https://"+testToken+"."+password+".example"),
		"redirect home":        ntfytest.Redirect(http.StatusTemporaryRedirect, other.URL),
		"hang":                 ntfytest.Hang(),
		"closed":               ntfytest.CloseConnection(),
		"reset":                ntfytest.Reset(),
		"broke off":            ntfytest.Truncated(),
	}
	var seen bytes.Buffer
	logText := slog.New(slog.NewTextHandler(&seen, nil))
	logJSON := slog.New(slog.NewJSONHandler(&seen, nil))
	read := func(what string, vs ...any) {
		for _, v := range vs {
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
				fmt.Fprintf(&seen, "%s "+verb+"\n", what, v)
			}
			logText.Info(what, "value", v)
			logJSON.Info(what, "value", v)
		}
	}
	failures := 0
	for name, f := range faults {
		srv.SetFault(f)
		for _, tg := range append(append([]Target(nil), live...), down) {
			n := New(tg, nil, "")
			for _, m := range []notify.Message{{Text: "hello " + name, ID: "abc"}, {ID: "abc", Delete: true}} {
				timeout := relaxedTimeout
				if name == "hang" {
					timeout = hangTimeout
				}
				_, err := push(t, n, timeout, m)
				read(name, tg, n, err)
				var pe *notify.Error
				if errors.As(err, &pe) {
					failures++
					fmt.Fprintf(&seen, "%s class=%s detail=%s saw=%s\n", name, pe.Class, pe.Detail, pe.Saw)
					read(name, *pe, pe)
				}
			}
		}
	}
	if failures < 30 {
		t.Errorf("only %d failures swept", failures)
	}
	out := seen.String()
	for _, s := range secrets {
		if i := strings.Index(out, s); i >= 0 {
			t.Errorf("%q appears in what lavender shows: …%s…", s, out[max(0, i-200):min(len(out), i+100)])
		}
	}
	if strings.Contains(out, "tk_zzzzzzzzzzzzzzzzzzzzzzzzzzzzz") {
		t.Error("another token quoted by the server appears")
	}
	// The sweep read something: the classes and the server's own words.
	for _, want := range []string{"HTTP 401", "ntfy 40101: refused /t with <redacted>", "redirect", "not-ntfy", "timeout", "connection refused", "p.ntfy.env:1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the sweep never saw %q", want)
		}
	}
	// What the server got: the credential, only in the header.
	for _, p := range srv.Publishes() {
		if strings.Contains(p.RequestURI, "?") || strings.Contains(p.RequestURI, testToken) {
			t.Errorf("request URI %q", p.RequestURI)
		}
	}
	if c := other.Count(); c != 0 {
		t.Errorf("the redirect target got %d requests", c)
	}
}
