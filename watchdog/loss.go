package watchdog

import (
	"slices"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// LossRule pushes "loss" once per run of a phase whose loss turns NaN or
// infinite: the training diverged, and every further step only burns the
// GPU. The alert's Began is the poll that first saw it. A phase already
// ended with such a loss at the first sample is old news and never pushes;
// one that ends between two polls with a non-finite loss still does (a short
// run that diverged and "finished"). A push no target accepted is retried
// with a backoff until one does.
type LossRule struct {
	outbox outbox

	baselined bool
	// seen are the runs already pushed, with the push's Began, or already
	// old at the first sample (a zero time).
	seen map[phaseRun]time.Time
}

// Name is "loss".
func (r *LossRule) Name() RuleName { return RuleLoss }

// nonFiniteLoss reports whether p's latest loss is NaN or ±Inf.
func nonFiniteLoss(p phaseapi.Phase) bool {
	return p.Loss != nil && !p.Loss.Finite()
}

// Observe pushes for each phase whose loss has turned non-finite since the
// last sample.
func (r *LossRule) Observe(s Sample, now time.Time) []Alert {
	seen := make(map[phaseRun]time.Time, len(s.Phases))
	var fresh []Alert
	for _, p := range s.Phases {
		if !nonFiniteLoss(p) {
			continue
		}
		key := phaseRun{p.Name, p.Started.UnixNano()}
		if began, ok := r.seen[key]; ok {
			seen[key] = began
			continue
		}
		seen[key] = time.Time{}
		if !r.baselined && p.Status != phaseapi.StatusActive {
			continue
		}
		seen[key] = now
		fresh = append(fresh, Alert{Rule: RuleLoss, Status: Firing, Incident: p.Name, Began: now, At: now, Sample: s, Phase: p.Name})
	}
	// A run whose loss came back finite stays remembered while it is in the
	// table: one push per run, not one per NaN spell.
	for key, began := range r.seen {
		if _, ok := seen[key]; !ok && phaseInTable(s, key) {
			seen[key] = began
		}
	}
	r.baselined, r.seen = true, seen
	return r.outbox.send(fresh, now, s.Stopping)
}

func phaseInTable(s Sample, key phaseRun) bool {
	return slices.ContainsFunc(s.Phases, func(p phaseapi.Phase) bool {
		return p.Name == key.name && p.Started.UnixNano() == key.started
	})
}

// Pushed forgets a delivered push, or schedules a retry of what is pending.
func (r *LossRule) Pushed(a Alert, delivered bool, now time.Time) {
	r.outbox.pushed(func(p Alert) bool { return p.Phase == a.Phase && p.Began.Equal(a.Began) }, delivered, now)
}

// State: armed unless a push waits for a target.
func (r *LossRule) State() RuleState { return r.outbox.state(RuleLoss) }
