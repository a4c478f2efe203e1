package ntfy

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/ntfytest"
	"github.com/lavender-ml/lavender/notify"
)

// Timeouts of the test pushes. Nothing asserts on timing: hangTimeout keeps
// the cases that wait on a hanging ntfy short, and every other case gets a
// timeout it never comes near, so a loaded CI machine cannot turn a
// success into a "timeout".
const (
	hangTimeout    = 200 * time.Millisecond
	relaxedTimeout = 10 * time.Second
)

// testToken is an ntfy access token in ntfy's own shape.
const testToken = "tk_abcdefghij0123456789klmnopqrs"

// load writes phone.ntfy.env (line) and the other files into a fresh
// config dir and loads it; a bad line fails the test.
func load(t testing.TB, line string, files map[string]string) []Target {
	t.Helper()
	all := map[string]string{"phone.ntfy.env": line}
	maps.Copy(all, files)
	res, err := LoadTargets(ntfytest.ConfigDir(t, all))
	if err != nil {
		t.Fatalf("LoadTargets: %v", err)
	}
	return res.Targets
}

// notifier is the notifier of the one target of line.
func notifier(t testing.TB, line string, files map[string]string) *Notifier {
	t.Helper()
	ts := load(t, line, files)
	if len(ts) != 1 {
		t.Fatalf("%d targets, want 1", len(ts))
	}
	return New(ts[0], nil, "")
}

// push sends m once within timeout.
func push(t testing.TB, n *Notifier, timeout time.Duration, m notify.Message) (bool, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	return n.Notify(ctx, m)
}

// mustPush sends m and fails the test if ntfy did not accept it.
func mustPush(t testing.TB, n *Notifier, m notify.Message) {
	t.Helper()
	if _, err := push(t, n, relaxedTimeout, m); err != nil {
		t.Fatalf("Notify(%+v): %v (%#v)", m, err, err)
	}
}

// notifyText is a message of text alone.
func notifyText(text string) notify.Message { return notify.Message{Text: text} }

func errorsAs(err error, target any) bool { return errors.As(err, target) }
