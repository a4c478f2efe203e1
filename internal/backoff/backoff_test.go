package backoff

import (
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name                 string
		prev, first, ceiling time.Duration
		want                 time.Duration
	}{
		{"first failure waits first", 0, 5 * s, 60 * s, 5 * s},
		{"doubles", 5 * s, 5 * s, 60 * s, 10 * s},
		{"capped", 40 * s, 5 * s, 60 * s, 60 * s},
		{"stays at the cap", 60 * s, 5 * s, 60 * s, 60 * s},
		{"no cap when ceiling is 0", 40 * s, 5 * s, 0, 80 * s},
		{"a cap below first wins", 0, 5 * s, 2 * s, 2 * s},
		{"a shorter first after a longer wait still doubles", 8 * s, 1 * s, 0, 16 * s},
	} {
		if got := Next(tc.prev, tc.first, tc.ceiling); got != tc.want {
			t.Errorf("%s: Next(%s, %s, %s) = %s, want %s", tc.name, tc.prev, tc.first, tc.ceiling, got, tc.want)
		}
	}
}

// TestNextSequence: from nothing, the waits are first, 2×, 4×, … up to the cap.
func TestNextSequence(t *testing.T) {
	var (
		wait time.Duration
		got  []time.Duration
	)
	for range 6 {
		wait = Next(wait, 250*time.Millisecond, 2*time.Second)
		got = append(got, wait)
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
}
