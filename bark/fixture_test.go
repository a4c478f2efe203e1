package bark

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
)

// Timeouts of the test pushes. Nothing asserts on timing: hangTimeout keeps
// the cases that wait on a hanging Bark short, and every other case gets a
// timeout it never comes near, so a loaded CI machine (or -race on a TLS
// handshake) cannot turn a success into a "timeout".
const (
	hangTimeout    = 200 * time.Millisecond
	relaxedTimeout = 10 * time.Second
)

// apnsTestToken is a device token as APNs issues them: 64 hex characters.
const apnsTestToken = "5f1c0e9a7b3d2c4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"

// apnsRefused is bark-server's answer when APNs refuses a push: it quotes
// the device token.
func apnsRefused() barktest.Fault {
	return barktest.Status(500, `push failed: Post "https://api.push.apple.com/3/device/`+apnsTestToken+`": remote error`)
}

// load writes the *.bark.env files (name → content) into a fresh config
// dir and loads it; a bad line fails the test.
func load(t testing.TB, files map[string]string) []Target {
	t.Helper()
	res, err := LoadTargets(barktest.ConfigDir(t, files))
	if err != nil {
		t.Fatalf("LoadTargets: %v", err)
	}
	return res.Targets
}

// sent is one target's outcome in sendAll: what its Notify returned.
type sent struct {
	Target    string // file:line
	Err       error
	Retryable bool
}

// sendAll pushes msg once to every target of files, one after the other,
// each push within timeout. client nil: the shared client. (`send` pushes
// to them all at once through delivery.SendEach, which delivery's tests
// check.)
func sendAll(t testing.TB, files map[string]string, timeout time.Duration, client *http.Client, msg string) []sent {
	t.Helper()
	var res []sent
	for _, tg := range load(t, files) {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		retry, err := New(tg, client, "").Notify(ctx, Push{Text: msg})
		cancel()
		res = append(res, sent{Target: tg.Name(), Err: err, Retryable: retry})
	}
	return res
}
