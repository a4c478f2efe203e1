package app

import (
	"bytes"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestSend: what `send` prints and returns for each outcome, the retry
// stage included.
func TestSend(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fault      barktest.Fault
		opts       SendOptions
		wantStdout string
		wantStderr string
		wantErr    string // "": none
		wantTries  int
	}{
		{"accepted", nil, SendOptions{Message: "  hello phone  "}, "phone.bark.env:1 ok\n", "", "", 1},
		{"a 503 then accepted", barktest.FailFirst(1, barktest.Status(503, "busy")), SendOptions{Message: "hello"}, "phone.bark.env:1 ok\n", "", "", 2},
		{"every target failed", barktest.Status(400, "push failed"), SendOptions{Message: "hello"},
			"phone.bark.env:1 failed: HTTP 400\n", "[bark] phone.bark.env:1 failed: HTTP 400\n", "send: every target failed (1 of 1)", 1},
		{"empty message", nil, SendOptions{Message: "   "}, "", "", "send: the message is empty (or use --test)", 0},
		{"test with a message", nil, SendOptions{Test: true, Message: "hi"}, "", "", "send: --test sends its own text; give no message with it", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := barktest.New(t, "KEY")
			srv.SetFault(tc.fault)
			o := tc.opts
			o.Command, o.Timeout = "send", 10*time.Second
			o.ConfigDir = barktest.ConfigDir(t, map[string]string{"phone.bark.env": srv.Template("KEY") + "\n"})
			var stdout, stderr bytes.Buffer
			err := Send(t.Context(), o, Env{Logger: slog.New(slog.DiscardHandler)}, &stdout, &stderr)
			if got := errText(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if stdout.String() != tc.wantStdout || stderr.String() != tc.wantStderr {
				t.Errorf("stdout %q, stderr %q; want %q, %q", stdout.String(), stderr.String(), tc.wantStdout, tc.wantStderr)
			}
			if n := srv.Count(); n != tc.wantTries {
				t.Errorf("Bark got %d requests, want %d", n, tc.wantTries)
			}
			if tc.wantTries > 0 && tc.wantErr == "" {
				if got := srv.Accepted(); len(got) != 1 || got[0].Body != strings.TrimSpace(o.Message) {
					t.Errorf("accepted %+v, want the trimmed message once", got)
				}
			}
		})
	}
}

// TestCheck: a line per target and a summary; a bad line fails the check
// after the good ones are listed; no file at all is an error naming both
// suffixes.
func TestCheck(t *testing.T) {
	good := "https://api.day.app/KEY/$0"
	for _, tc := range []struct {
		name       string
		files      map[string]string
		wantStdout []string
		wantErr    string
	}{
		{"one target", map[string]string{"phone.bark.env": good + "\n"}, []string{"1 Bark target in 1 file"}, ""},
		{"a bad line", map[string]string{"phone.bark.env": good + "\nnot a url\n"}, []string{"1 Bark target in 1 file, 1 bad line"}, "check: 1 bad line"},
		{"nothing", map[string]string{}, nil, "check: no targets (*.bark.env or *.ntfy.env files) in "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := barktest.ConfigDir(t, tc.files)
			var stdout, stderr testkit.SyncBuffer
			err := Check("check", dir, &stdout, &stderr)
			if got := errText(err); !strings.HasPrefix(got, tc.wantErr) || (tc.wantErr == "") != (got == "") {
				t.Errorf("error %q, want it to start %q", got, tc.wantErr)
			}
			for _, want := range tc.wantStdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
				}
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestSendRefusesATimeoutThatIsNotPositive: before it reads anything (the
// config dir here does not exist), naming the flag.
func TestSendRefusesATimeoutThatIsNotPositive(t *testing.T) {
	for _, timeout := range []time.Duration{0, -time.Second} {
		o := SendOptions{Command: "send", ConfigDir: filepath.Join(t.TempDir(), "missing"), Timeout: timeout, Message: "hello"}
		err := Send(t.Context(), o, Env{Logger: slog.New(slog.DiscardHandler)}, io.Discard, io.Discard)
		if want := "--bark.timeout must be positive, not " + timeout.String(); err == nil || err.Error() != want {
			t.Errorf("timeout %s: %v, want %q", timeout, err, want)
		}
	}
}
