package statuspage

import (
	"fmt"
	"slices"
	"time"
)

// orderPhases puts what the page is opened for first: the running phases
// (a stalled one before the others, then the newest), then the ended ones,
// the latest end first.
func orderPhases(phases []Phase) {
	slices.SortStableFunc(phases, func(a, b Phase) int {
		switch {
		case a.Running() != b.Running():
			if a.Running() {
				return -1
			}
			return 1
		case a.Running():
			if (a.Stalled != nil) != (b.Stalled != nil) {
				if a.Stalled != nil {
					return -1
				}
				return 1
			}
			return b.Started.Compare(a.Started)
		}
		return endOf(b).Compare(endOf(a))
	})
}

func endOf(p Phase) time.Time {
	if !p.Ended.IsZero() {
		return p.Ended
	}
	return p.Started
}

// Diverged reports whether the phase's last loss is NaN or infinite: an
// ok end then does not mean a usable model.
func (p Phase) Diverged() bool { return p.Loss != nil && !p.Loss.Finite() }

// LossText is the last loss to show beside the progress, "" without one:
// four significant digits, NaN and infinities as the API writes them.
func (p Phase) LossText() string {
	switch {
	case p.Loss == nil:
		return ""
	case !p.Loss.Finite():
		return p.Loss.String()
	}
	return fmt.Sprintf("%.4g", float64(*p.Loss))
}

// ibytes is a size in binary units with their names ("16.0 MiB", "1.2
// GiB"): the page labels what it measures. The pushes keep the
// predecessor's "GB".
func ibytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%d B", n)
	case v < 9.95:
		return fmt.Sprintf("%.1f %s", v, units[i])
	}
	return fmt.Sprintf("%.0f %s", v, units[i])
}
