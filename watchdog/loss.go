package watchdog

import (
	"math"
	"slices"
	"time"
)

// LossRule pushes "loss" once per run of a phase whose loss turns NaN or
// infinite: the training diverged, and every further step only burns the
// GPU. The alert's Began is the poll that first saw it. A phase already
// ended with such a loss at the first sample is old news and never pushes;
// one that ends between two polls with a non-finite loss still does (a short
// run that diverged and "finished"). A push no target accepted is retried
// with a backoff until one does.
type LossRule struct {
	repeat, retry time.Duration

	baselined bool
	seen      map[phaseRun]bool // runs already pushed (or already old at the first sample)
	pending   []Alert
	retryAt   time.Time
	backoff   time.Duration
}

// Name is "loss".
func (r *LossRule) Name() string { return PhaseRuleLoss }

// NonFiniteLoss reports whether p's latest loss is NaN or ±Inf.
func (p PhaseState) NonFiniteLoss() bool {
	return p.HasLoss && (math.IsNaN(p.Loss) || math.IsInf(p.Loss, 0))
}

// Observe pushes for each phase whose loss has turned non-finite since the
// last sample.
func (r *LossRule) Observe(s Sample, now time.Time) []Alert {
	seen := make(map[phaseRun]bool, len(s.Phases))
	var fresh []Alert
	for _, p := range s.Phases {
		if !p.NonFiniteLoss() {
			continue
		}
		key := phaseRun{p.Name, p.Started.UnixNano()}
		seen[key] = true
		if r.seen[key] || (!r.baselined && p.Status != PhaseActive) {
			continue
		}
		fresh = append(fresh, Alert{Rule: PhaseRuleLoss, Status: Firing, Began: now, At: now, Sample: s, Phase: p.Name})
	}
	// A run whose loss came back finite stays remembered while it is in the
	// table: one push per run, not one per NaN spell.
	for key := range r.seen {
		if !seen[key] && phaseInTable(s, key) {
			seen[key] = true
		}
	}
	r.baselined, r.seen = true, seen
	if len(fresh) > 0 {
		r.pending = append(r.pending, fresh...)
		return fresh
	}
	if len(r.pending) > 0 && !now.Before(r.retryAt) {
		return slices.Clone(r.pending)
	}
	return nil
}

func phaseInTable(s Sample, key phaseRun) bool {
	return slices.ContainsFunc(s.Phases, func(p PhaseState) bool {
		return p.Name == key.name && p.Started.UnixNano() == key.started
	})
}

// Pushed forgets a delivered push, or schedules a retry of what is pending.
func (r *LossRule) Pushed(a Alert, delivered bool, now time.Time) {
	i := slices.IndexFunc(r.pending, func(p Alert) bool { return p.Phase == a.Phase && p.Began.Equal(a.Began) })
	if i < 0 {
		return
	}
	if delivered {
		r.pending = slices.Delete(r.pending, i, i+1)
		if len(r.pending) == 0 {
			r.retryAt, r.backoff = time.Time{}, 0
		}
		return
	}
	r.backoff = nextBackoff(r.backoff, r.retry, r.repeat)
	r.retryAt = now.Add(r.backoff)
}

// State: armed unless a push waits for a target.
func (r *LossRule) State() RuleState {
	st := RuleState{Name: PhaseRuleLoss, Armed: len(r.pending) == 0}
	if len(r.pending) > 0 {
		st.Since = r.pending[0].Began
	}
	return st
}
