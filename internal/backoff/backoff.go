// Package backoff is lavender's one retry backoff: the wait doubles after
// each failed try, from a first wait up to a cap. Delivery waits it
// between the tries of one push (seconds); the watchdog's rules wait it
// between pushes that reached no phone (from the poll interval up to the
// reminder cadence); `lavender phase run` between the tries of its end
// while the exporter restarts.
package backoff

import "time"

// Next is the wait after a failed try when the last wait was prev: first
// at the first failure (prev 0), then twice prev, never over ceiling (no
// cap when ceiling is 0).
func Next(prev, first, ceiling time.Duration) time.Duration {
	b := max(first, 2*prev)
	if ceiling > 0 {
		b = min(b, ceiling)
	}
	return b
}
