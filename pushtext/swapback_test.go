package pushtext

import (
	"math"
	"testing"
	"time"
)

// TestSwapBackUnder: the resolution of a swap alert without figures of its
// own says swap is back under the rule's threshold, rounded up so that it
// holds of every ratio under it, or under "its threshold" when none is known.
func TestSwapBackUnder(t *testing.T) {
	tests := []struct {
		threshold float64
		lasted    time.Duration
		want      string
	}{
		{0.5, 42 * time.Minute, "resolved: swap back under 50% after 42m"},
		{0.575, 5 * time.Second, "resolved: swap back under 58% after 5s"},
		{0.07, time.Hour, "resolved: swap back under 7% after 1h"},
		{0.9, 0, "resolved: swap back under 90%"},
		{1, time.Minute, "resolved: swap back under 100% after 1m"},
		{0, time.Minute, "resolved: swap back under its threshold after 1m"},
		{-0.5, time.Minute, "resolved: swap back under its threshold after 1m"},
		{1.5, time.Minute, "resolved: swap back under its threshold after 1m"},
		{math.NaN(), time.Minute, "resolved: swap back under its threshold after 1m"},
	}
	for _, tt := range tests {
		got := SwapBackUnder(tt.threshold, tt.lasted)
		if got.Body != tt.want || got.Subject != "resolved swap" {
			t.Errorf("SwapBackUnder(%v, %v) = %q, subject %q; want %q, subject \"resolved swap\"", tt.threshold, tt.lasted, got.Body, got.Subject, tt.want)
		}
	}
}
