package bark

import (
	"context"
	"sync"
	"time"
)

// Send pushes to every notifier at once, each push bounded by timeout, and
// returns one Result per notifier in their order. push gives each target's
// push, so that a self-test can name the target's encryption. It neither
// deduplicates nor retries: what `bark send` does.
func Send(ctx context.Context, ns []*Notifier, timeout time.Duration, push func(Target) Push) []Result {
	results := make([]Result, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			retry, err := n.Notify(ctx, push(n.Target()))
			results[i] = Result{Target: n.Target().Name(), Err: err, Retryable: retry}
		})
	}
	wg.Wait()
	return results
}
