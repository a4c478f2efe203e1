package testkit

import (
	"sync"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := NewClock(start)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Second)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got := c.Now(); !got.Equal(start.Add(400 * time.Second)) {
		t.Fatalf("after 400 advances of 1s: %s", got)
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("after Set: %s", got)
	}
}
