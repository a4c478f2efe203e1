package pushtext

import (
	"fmt"
	"math"
	"strconv"

	"github.com/lavender-ml/lavender/watchdog"
)

// SwapFigures describe swap use. TotalBytes == 0 means the byte figures are
// unknown and the text leaves them out.
type SwapFigures struct {
	Ratio                 float64 // used/total on a 0–1 scale
	UsedBytes, TotalBytes uint64
}

// Swap is "swap 54% full (16.3/32.0 GB) — consider intervening", subject
// "swap 54%": the one swap text, for the watchdog and the webhook alike.
func Swap(s SwapFigures) Text { return urging(swapText(s), swapSubject(s)) }

// swapText is "swap 54% full (16.3/32.0 GB)". The percent is rounded; a GB
// is 2^30 bytes, shown with one decimal.
func swapText(s SwapFigures) string {
	text := "swap " + swapPercent(s) + " full"
	if s.BytesKnown() {
		const gib = 1 << 30
		text += fmt.Sprintf(" (%.1f/%.1f GB)", float64(s.UsedBytes)/gib, float64(s.TotalBytes)/gib)
	}
	return text
}

// swapSubject names a swap push in the run log: "swap 54%".
func swapSubject(s SwapFigures) string { return "swap " + swapPercent(s) }

func swapPercent(s SwapFigures) string {
	r := s.Ratio
	if !UsableRatio(r) && s.BytesKnown() {
		r = float64(s.UsedBytes) / float64(s.TotalBytes)
	}
	return percent(r)
}

// BytesKnown reports whether the byte figures make sense: a total, and no
// more used than that.
func (s SwapFigures) BytesKnown() bool { return s.TotalBytes > 0 && s.UsedBytes <= s.TotalBytes }

// UsableRatio reports whether r is a ratio a text can show: in [0, 1].
func UsableRatio(r float64) bool { return !math.IsNaN(r) && r >= 0 && r <= 1 }

// percent is "23%", rounded, or "?%" for a ratio that is not one. Only
// a full ratio reads "100%" and only an empty one "0%": 99.6% rounded up
// would say swap is full beside byte figures that say it is not.
func percent(r float64) string {
	if !UsableRatio(r) {
		return "?%"
	}
	n := int(math.Round(r * 100))
	switch {
	case n == 100 && r < 1:
		n = 99
	case n == 0 && r > 0:
		n = 1
	}
	return strconv.Itoa(n) + "%"
}

// swapOrNone is swapText, or "no swap" on a host without it.
func swapOrNone(s SwapFigures) string {
	if s.TotalBytes == 0 {
		return "no swap"
	}
	return swapText(s)
}

// watchdogSwap is the text of the swap rule's alert.
func watchdogSwap(a watchdog.Alert) Text { return Swap(swapFigures(a.Sample.Swap)) }

func swapFigures(s watchdog.Swap) SwapFigures {
	return SwapFigures{Ratio: s.Ratio, UsedBytes: s.UsedBytes, TotalBytes: s.TotalBytes}
}
