package diskguard

import (
	"context"
	"testing"
	"time"
)

// TestStart: the first poll comes at once; AwaitFirst waits for it, or
// gives up when its context ends while the statfs hangs; Wait returns once
// the guard's context has ended.
func TestStart(t *testing.T) {
	r := newRig(t, Config{Paths: []string{"/data"}})
	r.fs.set("/data", disk(1, 100*gib, 10*gib))
	hang := make(chan struct{})
	r.fs.mu.Lock()
	r.fs.hang["/data"] = hang
	r.fs.mu.Unlock()

	ctx, cancel := context.WithCancel(t.Context())
	s := r.g.Start(ctx, time.Hour)
	short, giveUp := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer giveUp()
	s.AwaitFirst(short) // must return: the statfs hangs
	if short.Err() == nil {
		t.Fatal("AwaitFirst returned before the first poll did, or its context ended")
	}
	close(hang)
	s.AwaitFirst(t.Context())
	if got := r.only(r.g.Latest()); got.Path != "/data" || got.Stat.Size != 100*gib {
		t.Errorf("after the first poll: %+v", got)
	}
	cancel()
	waited := make(chan struct{})
	go func() { s.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return after the context ended")
	}
}
