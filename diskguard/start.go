package diskguard

import (
	"context"
	"time"
)

// Started is a guard polling on its own goroutine; see Start.
type Started struct {
	polled, done chan struct{}
}

// Start polls at once and then every interval until ctx ends, on its own
// goroutine, so that nothing else waits on a filesystem. A command waits
// for the first poll (AwaitFirst) before it reports ready, so the first
// scrape sees the disks, while its watchdog polls meanwhile: a path whose
// statfs hangs at the start delays no push either.
func (g *Guard) Start(ctx context.Context, interval time.Duration) *Started {
	s := &Started{polled: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		g.Poll(ctx)
		close(s.polled)
		g.Run(ctx, interval)
	}()
	return s
}

// AwaitFirst waits for the first poll, or for ctx to end.
func (s *Started) AwaitFirst(ctx context.Context) {
	select {
	case <-s.polled:
	case <-ctx.Done():
	}
}

// Wait returns once the guard has stopped.
func (s *Started) Wait() { <-s.done }
