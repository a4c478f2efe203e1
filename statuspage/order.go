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
