package delivery

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestPushHistoryConcurrentReaders is for -race: the status page snapshots
// the push history while deliveries record results and a reload prunes it.
func TestPushHistoryConcurrentReaders(t *testing.T) {
	h := newPushHistory()
	targets := []string{"phone.bark.env:1", "phone.bark.env:2"}
	const writes = 3 * MaxEvents // wraps the event ring several times
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
		for i := range writes {
			h.target(targets[i%2], "ok", at)
			h.event(Event{Time: at, Subject: fmt.Sprint(i), Failures: []string{"x"}})
			at = at.Add(time.Second)
		}
	}()
	go func() {
		defer wg.Done()
		for range writes / 10 {
			h.keepOnly(targets)
		}
	}()
	for range writes / 2 {
		s := h.snapshot(targets)
		if len(s.Targets) != len(targets) || len(s.Events) > MaxEvents {
			t.Fatalf("snapshot has %d targets and %d events", len(s.Targets), len(s.Events))
		}
	}
	wg.Wait()
	s := h.snapshot(targets)
	if len(s.Events) != MaxEvents || s.Events[0].Subject != fmt.Sprint(writes-1) {
		t.Fatalf("after %d events: %d kept, newest %q", writes, len(s.Events), s.Events[0].Subject)
	}
}
