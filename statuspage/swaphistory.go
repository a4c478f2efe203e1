package statuspage

import (
	"time"

	"lavender/exporter"
	"lavender/watchdog"
)

// FromSwapHistory reads the exporter's swap history as the page's History,
// for the commands that still sample through it. It goes once cmd feeds
// the page the watchdog's History, which already is one.
func FromSwapHistory(h *exporter.SwapHistory) History { return swapHistory{h} }

type swapHistory struct{ h *exporter.SwapHistory }

func (s swapHistory) Window() time.Duration { return s.h.Window() }

func (s swapHistory) Latest() (watchdog.Sample, error) {
	x, err := s.h.Latest()
	return sample(x), err
}

func (s swapHistory) Samples() []watchdog.Sample {
	xs := s.h.Samples()
	out := make([]watchdog.Sample, len(xs))
	for i, x := range xs {
		out[i] = sample(x)
	}
	return out
}

func sample(x exporter.SwapSample) watchdog.Sample {
	s := watchdog.Sample{Time: x.Time, Swap: watchdog.Swap{UsedBytes: x.UsedBytes, TotalBytes: x.TotalBytes, Ratio: x.UsedRatio}}
	if x.PressureSomeAvg10 != nil {
		s.Pressure = watchdog.Pressure{Available: true, Some: *x.PressureSomeAvg10}
	}
	return s
}
