package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/ntfytest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestSendReachesEveryChannel: `lavender send --test` (and its first
// spelling, `bark send --test`) pushes the same test text to a Bark and an
// ntfy target, the ntfy one with its token in the Authorization header
// only; `check` lists both channels' targets and counts them.
func TestSendReachesEveryChannel(t *testing.T) {
	const token = "tk_abcdefghijklmnopqrstuvwxyz123"
	bark, ntfy := barktest.New(t), ntfytest.New(t)
	ntfy.RequireToken(token)
	dir := barktest.ConfigDir(t, map[string]string{
		"phone.bark.env": bark.URL + "/KEY/$0\n",
		"phone.ntfy.env": ntfy.TopicURL(ntfytest.Topic) + " token_file=ntfy.token\n",
	})
	if err := os.WriteFile(filepath.Join(dir, "ntfy.token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, args := range [][]string{{"send", "--test"}, {"bark", "send", "--test"}} {
		out, stderr, err := runCLI(t, append(args, "--bark.config-dir", dir)...)
		if err != nil || out != "phone.bark.env:1 ok\nphone.ntfy.env:1 ok\n" {
			t.Fatalf("%v: %q %q %v", args, out, stderr, err)
		}
		if strings.Contains(out+stderr, token) {
			t.Errorf("%v: the token is in the output", args)
		}
		b, n := bark.Pushes(), ntfy.Publishes()
		if len(b) != i+1 || len(n) != i+1 {
			t.Fatalf("%v: %d Bark pushes, %d ntfy publishes", args, len(b), len(n))
		}
		if got := n[i]; got.Message != b[i].Body || !strings.HasPrefix(got.Message, "[lavender-2] test push (not encrypted) at the longest") ||
			got.Auth != "bearer" || got.Token != token || strings.Contains(got.RequestURI, token) || got.Priority != 2 || len(got.Tags) != 1 || got.Tags[0] != "test_tube" {
			t.Errorf("%v: ntfy got %+v, Bark %q", args, got, b[i].Body)
		}
	}
	out, _, err := runCLI(t, "check", "--bark.config-dir", dir)
	if err != nil || !strings.HasPrefix(out, "phone.bark.env:1 ok (127.0.0.1:") || !strings.Contains(out, "\nphone.ntfy.env:1 ok (") ||
		!strings.HasSuffix(out, "\n2 targets (1 Bark, 1 ntfy) in 2 files\n") || strings.Contains(out, token) {
		t.Errorf("check: %q %v", out, err)
	}
	if _, _, err := runCLI(t, "send", "--bark.config-dir", t.TempDir(), "hi"); err == nil || !strings.HasPrefix(err.Error(), "send: no targets (*.bark.env or *.ntfy.env files) in ") {
		t.Errorf("send without targets: %v", err)
	}
}

// TestLoggerScrubsEveryChannel: lavender's logger keeps the secrets of
// every channel's loaded targets out of what it writes (a library's text,
// the standard log package): a Bark device key and an ntfy token alike,
// and any text shaped like an ntfy token.
func TestLoggerScrubsEveryChannel(t *testing.T) {
	const (
		key   = "LOGGERKEY0123456789"
		token = "tk_loggertoken0123456789abcdefgh"
		other = "tk_someoneelse0123456789abcdefgh"
	)
	dir := barktest.ConfigDir(t, map[string]string{
		"phone.bark.env": "https://bark.example/" + key + "/$0\n",
		"phone.ntfy.env": "https://ntfy.example/alerts token_env=LAVENDER_TEST_NTFY_TOKEN\n",
	})
	t.Setenv("LAVENDER_TEST_NTFY_TOKEN", token)
	if _, err := delivery.LoadTargets(dir, nil); err != nil {
		t.Fatal(err)
	}
	var buf testkit.SyncBuffer
	logger, err := app.NewLogger("debug", "logfmt", &buf)
	if err != nil {
		t.Fatal(err)
	}
	logger.Warn("proxy said Authorization: Bearer "+token, "body", "GET /"+key+"/x", "err", errors.New("quoted "+other))
	if got := buf.String(); strings.Contains(got, key) || strings.Contains(got, token) || strings.Contains(got, other) || strings.Count(got, "<redacted>") != 3 {
		t.Errorf("log line %q", got)
	}
}
