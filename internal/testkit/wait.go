package testkit

import (
	"testing"
	"time"
)

// pollEvery is how often WaitFor looks again.
const pollEvery = 10 * time.Millisecond

// WaitFor polls condition until it holds, and fails the test if it has not
// within timeout: "gave up after 30s waiting for <what>". The timeout is a
// deadline for a test that would otherwise hang, not a speed requirement:
// give a generous one (tens of seconds) so a loaded machine cannot fail it.
func WaitFor(t testing.TB, timeout time.Duration, condition func() bool, what string) {
	t.Helper()
	if !Poll(timeout, condition) {
		t.Fatalf("gave up after %v waiting for %s", timeout, what)
	}
}

// Poll is WaitFor without the test: it reports whether condition held
// within timeout.
func Poll(timeout time.Duration, condition func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if condition() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
}

// NoHang runs f and fails the test if it has not returned after a minute:
// a guard against a call that blocks for ever, not a speed check.
func NoHang(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return within a minute: it blocks", what)
	}
}
