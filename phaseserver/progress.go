package phaseserver

import (
	"fmt"
	"math"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// rateHalfLife is the half-life of the smoothed step rate behind the ETA:
// an interval that ended this long ago weighs half as much as one that
// ends now. A few minutes let the ETA follow a run that speeds up after
// warm-up, or slows down for evaluation, within some ten minutes, without
// jumping at every uneven step.
const rateHalfLife = 5 * time.Minute

// checkProgress validates the progress a heartbeat carries against what the
// phase already reported: step ≥ 0 (the type sees to it), total ≥ 1, a
// step and a total sent together with the step not past the total, and a
// total sent alone not below the step the phase has reached. Those are a
// client's contradictions, and nothing here can tell which number is wrong.
//
// A step sent alone past the total the phase knows is not one: the newer
// number wins, and advanceProgress drops the total. Clients send that on
// purpose when their own total turns out short (a loop that counts two
// optimizer steps per batch against a total of batches), and they leave the
// total out precisely because they no longer trust it.
func checkProgress(step, total *uint64, known phaseapi.Progress) error {
	if total != nil && *total == 0 {
		return fmt.Errorf("%w: total must be 1 or more, not 0", errBadProgress)
	}
	if total == nil {
		return nil
	}
	s := known.Step
	if step != nil {
		s = step
	}
	if s != nil && *s > *total {
		return fmt.Errorf("%w: step %d is past the total of %d", errBadProgress, *s, *total)
	}
	return nil
}

// advanceProgress applies one heartbeat's progress to p at now. A step above the
// last one is an advance: it moves ProgressAt and feeds the rate. A step
// below it (a run resumed from a checkpoint) is recorded as it comes and
// starts the rate afresh, since what came before describes another stretch
// of the run. The same step again changes nothing, so a stall shows.
//
// The rate is an exponentially weighted average over time: each interval
// between two advances contributes its own rate (steps / seconds) with the
// weight 1 - 2^(-interval/rateHalfLife), and what came before keeps its
// weight (RateWeight) decayed by 2^(-interval/rateHalfLife). So intervals
// count by their length, the newest most: the first interval (warm-up,
// compilation, gradient accumulation filling up) counts for its few
// seconds, not for everything until the next ones outvote it, and it counts
// at most as much as the second. From the third interval on, one interval
// moves the rate at most halfway, so a single long pause (an evaluation, a
// checkpoint save) is felt without erasing the rate the run had before.
//
// A step past the known total, sent without a total, drops the total
// (checkProgress lets it through): it has proved wrong, and a phase without
// a total is what the API, the metrics and the status page can show
// honestly. Raising the total to the step instead would show 100% and an
// ETA of 0 for a run that goes on, and creep up with every later step; with
// no total there is no ETA and no lavender_phase_total_steps until the
// client sends a total again. The rate stays: the steps still came at it.
func advanceProgress(p *phaseapi.Progress, step, total *uint64, now time.Time) {
	if total != nil {
		p.Total = *total
	}
	if step == nil {
		return
	}
	if total == nil && p.Total > 0 && *step > p.Total {
		p.Total = 0
	}
	s := *step
	switch {
	case p.Step == nil || s < *p.Step:
		p.Rate, p.RateWeight, p.Advances, p.GapSeconds = 0, 0, 0, 0
	case s == *p.Step:
		return
	default:
		dt := now.Sub(p.ProgressAt).Seconds()
		p.Advances++
		if dt > 0 {
			inst := float64(s-*p.Step) / dt
			w := 1 - math.Exp2(-dt/rateHalfLife.Seconds())
			history := p.RateWeight * (1 - w)
			if p.Rate > 0 && history <= 0 {
				history = w // a table saved before the weight was kept
			}
			if p.Advances == 2 {
				history = min(history, w) // the first interval counts at most as much as the second
			}
			share := w / (history + w)
			if p.Advances > 2 {
				// Only a history of two intervals or more is held against a
				// long pause; the first interval alone counts for its length,
				// so a very short one (the first step right after the start)
				// weighs next to nothing.
				share = min(share, 0.5)
			}
			if p.Rate == 0 || history <= 0 {
				p.Rate = inst
			} else {
				p.Rate += share * (inst - p.Rate)
			}
			p.RateWeight = min(history+w, 1)
			p.GapSeconds = dt
		}
	}
	p.Step = &s // a fresh pointer: copies of the phase share the old one
	p.ProgressAt = now
}

// currentRate is the phase's rate as of now: while no step comes, the rate
// decays. Once the wait exceeds the last interval between advances, it is
// halved for every rateHalfLife of further waiting, so a hung run's rate
// falls and its ETA grows instead of counting down to a finish that is not
// coming. The API's steps_per_second and the ETA both use it.
func currentRate(p phaseapi.Phase, now time.Time) float64 {
	if !p.Active() || p.Rate <= 0 {
		return p.Rate
	}
	waited := now.Sub(p.ProgressAt).Seconds() - p.GapSeconds
	return p.Rate * math.Exp2(-max(waited, 0)/rateHalfLife.Seconds())
}

// phaseETA is the estimated time from now until the phase reaches its total,
// and whether there is one: the phase runs, its total is known, and two
// advancing heartbeats gave a rate. At the total it is 0, and there is one.
func phaseETA(p phaseapi.Phase, now time.Time) (time.Duration, bool) {
	if !p.Active() || p.Step == nil || p.Total == 0 || p.Advances < 2 || p.Rate <= 0 {
		return 0, false
	}
	remaining := float64(p.Total - min(*p.Step, p.Total))
	if remaining == 0 {
		return 0, true
	}
	secs := remaining / currentRate(p, now)
	if secs > maxETA.Seconds() || math.IsInf(secs, 0) || math.IsNaN(secs) {
		secs = maxETA.Seconds()
	}
	return time.Duration(secs * float64(time.Second)), true
}

// maxETA caps the estimate so a nearly stopped rate cannot overflow.
const maxETA = 100 * 365 * 24 * time.Hour
