package statuspage

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// chart is the swap history as an inline SVG: x is the last window, y the
// used ratio from 0 to 1. Memory pressure shares the 0–1 axis, so a page
// shows at a glance whether tasks stalled before swap filled.
type chart struct {
	Width, Height      float64
	Points             string  // swap polyline points, "x,y x,y …"
	PressurePoints     string  // pressure polyline points; "" without PSI
	ThresholdY         float64 // y of the swap threshold line
	PressureThresholdY float64 // y of the pressure threshold line
	Samples            int
	Window             string
}

func newChart(samples []SwapSample, threshold, pressureThreshold float64, now time.Time, window time.Duration) chart {
	c := chart{Width: 600, Height: 150, Samples: len(samples)}
	// Until the history covers the window, the chart spans what there is
	// (and says so), rather than an hour of which the line fills a corner.
	if len(samples) > 0 {
		if covered := now.Sub(samples[0].Time); covered > 0 && covered < window {
			window = max(covered.Round(time.Second), time.Second)
		}
	}
	c.Window = humanDuration(window)
	c.ThresholdY = c.y(threshold)
	c.PressureThresholdY = c.y(pressureThreshold)
	start := now.Add(-window)
	var pts, pressure []string
	for _, s := range samples {
		x := strconv.FormatFloat(min(max(float64(s.Time.Sub(start))/float64(window)*c.Width, 0), c.Width), 'f', 1, 64)
		// A NaN would pass min and max (they return it) into the points,
		// and the browser would drop the whole line.
		if !math.IsNaN(s.UsedRatio) {
			pts = append(pts, x+","+strconv.FormatFloat(c.y(s.UsedRatio), 'f', 1, 64))
		}
		if s.PressureSomeAvg10 != nil && !math.IsNaN(*s.PressureSomeAvg10) {
			pressure = append(pressure, x+","+strconv.FormatFloat(c.y(*s.PressureSomeAvg10), 'f', 1, 64))
		}
	}
	c.Points = strings.Join(pts, " ")
	c.PressurePoints = strings.Join(pressure, " ")
	return c
}

func (c chart) y(ratio float64) float64 { return c.Height * (1 - min(max(ratio, 0), 1)) }

// humanDuration is "3h 05m", "4m 10s" or "12s": enough for a glance.
func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}
