package pushtext

import (
	"math"
	"strings"
	"testing"
	"time"
)

const bytesPerGiB = 1 << 30

func giBytes(gb float64) uint64 { return uint64(gb * bytesPerGiB) }

// format is the swap push as the bridge sends it, before the client clips it.
func format(prefix string, s SwapFigures) string { return WithPrefix(prefix, Swap(s).Body) }

func TestFormatSwap(t *testing.T) {
	tests := []struct {
		s    SwapFigures
		want string
	}{
		{SwapFigures{Ratio: 0.54, UsedBytes: giBytes(16.3), TotalBytes: 32 * bytesPerGiB}, "[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening"},
		{SwapFigures{Ratio: 0.54}, "[lavender-2] swap 54% full — consider intervening"},
		{SwapFigures{Ratio: 0.545}, "[lavender-2] swap 55% full — consider intervening"},
		{SwapFigures{Ratio: 0.5449}, "[lavender-2] swap 54% full — consider intervening"},
		{SwapFigures{Ratio: 1, UsedBytes: 2 * bytesPerGiB, TotalBytes: 2 * bytesPerGiB}, "[lavender-2] swap 100% full (2.0/2.0 GB) — consider intervening"},
		{SwapFigures{Ratio: 0.5, UsedBytes: 512 << 20, TotalBytes: 1 * bytesPerGiB}, "[lavender-2] swap 50% full (0.5/1.0 GB) — consider intervening"},
		// Byte figures that cannot be right are left out rather than shown.
		{SwapFigures{Ratio: 0.6, UsedBytes: 3 * bytesPerGiB, TotalBytes: 2 * bytesPerGiB}, "[lavender-2] swap 60% full — consider intervening"},
		// A watchdog that only has bytes still gets a percent.
		{SwapFigures{Ratio: math.NaN(), UsedBytes: 3 * bytesPerGiB, TotalBytes: 4 * bytesPerGiB}, "[lavender-2] swap 75% full (3.0/4.0 GB) — consider intervening"},
		{SwapFigures{Ratio: math.Inf(1)}, "[lavender-2] swap ?% full — consider intervening"},
	}
	for _, tt := range tests {
		if got := format(DefaultPrefix, tt.s); got != tt.want {
			t.Errorf("format(%+v)\n got %q\nwant %q", tt.s, got, tt.want)
		}
	}
	if got := format("", SwapFigures{Ratio: 0.54}); got != "swap 54% full — consider intervening" {
		t.Errorf("no prefix: %q", got)
	}
	if got := WithPrefix("[box]", Resolved(Swap(SwapFigures{Ratio: 0.31, UsedBytes: giBytes(9.9), TotalBytes: 32 * bytesPerGiB}), 42*time.Minute).Body); got != "[box] resolved: swap 31% full (9.9/32.0 GB) after 42m" {
		t.Errorf("resolved: %q", got)
	}
}

// TestPercentSaysFullOrEmptyOnlyWhenItIs: a percent rounds, but never up
// to 100% nor down to 0% when the figure is not full or not empty: "swap
// 100% full" beside "(31.9/32.0 GB)" would contradict itself.
func TestPercentSaysFullOrEmptyOnlyWhenItIs(t *testing.T) {
	const total = 32 << 30
	for _, tc := range []struct {
		ratio float64
		want  string
	}{
		{0, "0%"}, {0.001, "1%"}, {0.004, "1%"}, {0.005, "1%"}, {0.54, "54%"}, {0.545, "55%"},
		{0.994, "99%"}, {0.996, "99%"}, {0.9999, "99%"}, {1, "100%"}, {-0.1, "?%"}, {math.NaN(), "?%"},
	} {
		if got := percent(tc.ratio); got != tc.want {
			t.Errorf("percent(%v) = %q, want %q", tc.ratio, got, tc.want)
		}
	}
	used := uint64(total) / 1000 * 996
	if got := Swap(SwapFigures{Ratio: float64(used) / total, UsedBytes: used, TotalBytes: total}).Body; !strings.HasPrefix(got, "swap 99% full (31.9/32.0 GB)") {
		t.Errorf("99.6%% of swap reads %q", got)
	}
	if got := Pressure(PressureFigures{Ratio: 0.996, Window: 10 * time.Second}).Body; !strings.HasPrefix(got, "memory pressure 99% (last 10s)") {
		t.Errorf("pressure 99.6%% reads %q", got)
	}
}
