package pushtext

import (
	"math"
	"strconv"
	"time"

	"github.com/lavender-ml/lavender/watchdog"
)

// PressureFigures describe memory pressure and the swap beside it.
type PressureFigures struct {
	Ratio  float64       // PSI "some" over Window, 0–1
	Window time.Duration // 10s for the watchdog's avg10, 1m for the alert's rate
	// Swap: TotalBytes 0 with SwapKnown means the host has no swap.
	Swap      SwapFigures
	SwapKnown bool
}

// Pressure is "memory pressure 23% (last 10s), swap 26% full (0.5/2.0 GB)
// — consider intervening", or "…, no swap — …"; subject "pressure 23%".
func Pressure(p PressureFigures) Text {
	text := "memory pressure " + percent(p.Ratio) + " (last " + windowText(p.Window) + ")"
	if p.SwapKnown {
		text += ", " + swapOrNone(p.Swap)
	}
	return urging(text, "pressure "+percent(p.Ratio))
}

// watchdogPressure is the text of the pressure rule's alert: PSI's avg10,
// with swap beside it.
func watchdogPressure(a watchdog.Alert) Text {
	return Pressure(PressureFigures{Ratio: a.Sample.Pressure.Some, Window: 10 * time.Second, Swap: swapFigures(a.Sample.Swap), SwapKnown: true})
}

// windowText is "10s", "1m", "90s", "5m".
func windowText(d time.Duration) string {
	switch {
	case d <= 0:
		return "?"
	case d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	default:
		return strconv.Itoa(int(math.Round(d.Seconds()))) + "s"
	}
}
