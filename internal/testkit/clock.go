package testkit

import (
	"sync"
	"time"
)

// Clock is a clock a test moves by hand. Its Now is safe to hand to code
// that reads the time from other goroutines (a server, a watchdog poll).
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a Clock at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t, which may be earlier: a clock step.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
