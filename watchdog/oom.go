package watchdog

import (
	"time"

	"github.com/lavender-ml/lavender/internal/backoff"
)

// OOMConfig tunes the OOM rule. It has no threshold: every kill counts.
type OOMConfig struct {
	Repeat time.Duration // caps the retry backoff (the reminder cadence); 0: no cap
	Retry  time.Duration // first retry after a push no target accepted; 0: DefaultInterval
}

// OOMRule pushes at once for every rise of the kernel's oom_kill counter
// between two polls, with the number of new kills and, if the kernel log
// named it, the victim. The first reading only sets the baseline, so kills
// from before lavender started never push; a counter that goes backwards
// sets it again. If no target accepts the push, the kills are kept and
// retried with a backoff, together with any kills that come meanwhile.
type OOMRule struct {
	repeat, retry time.Duration

	baselined  bool
	base       uint64 // oom_kill at the last reading
	lastVictim Victim // the newest kernel log record at the last reading
	lastRise   bool   // the last reading saw a rise
	// held is a victim the kernel log named before the counter rose: kernels
	// since 4.19 log the kill ("oom-kill:…task=python3,pid=4242") just
	// before they count it, and a poll can fall in between. It names the
	// next rise, if no newer record comes first.
	held    Victim
	pending *Alert // kills not yet delivered
	retryAt time.Time
	backoff time.Duration
}

// NewOOMRule checks cfg and returns the rule, waiting for its baseline.
func NewOOMRule(cfg OOMConfig) (*OOMRule, error) {
	repeat, retry, err := cadence(cfg.Repeat, cfg.Retry)
	if err != nil {
		return nil, err
	}
	return &OOMRule{repeat: repeat, retry: retry}, nil
}

// Name is RuleOOM.
func (r *OOMRule) Name() RuleName { return RuleOOM }

// Observe compares the kill counter with the last reading.
func (r *OOMRule) Observe(s Sample, now time.Time) []Alert {
	if o := s.OOM; o.Available {
		rise := r.baselined && o.Kills > r.base
		fresh := o.Victim.Known() && !o.Victim.Same(r.lastVictim)
		switch {
		case rise:
			r.struck(s, now, o.Kills-r.base)
			r.held = Victim{}
		case fresh && r.baselined && !r.lastRise:
			// Named without a rise, and not just after one (older kernels
			// log the victim only after counting it): the kill is still
			// to be counted.
			r.held = o.Victim
		}
		r.lastRise = rise
		// Every reading is the next one's baseline. At start, or after a
		// counter that went backwards, that is all it is: kills before it
		// are not news. A victim that appears without a rise right after
		// one belongs to a kill already counted, so it is never named for
		// a later one.
		r.baselined, r.base, r.lastVictim = true, o.Kills, o.Victim
		if rise {
			return []Alert{*r.pending}
		}
	}
	if r.pending != nil && !now.Before(r.retryAt) {
		return []Alert{*r.pending}
	}
	return nil
}

// struck adds n new kills to the pending push.
func (r *OOMRule) struck(s Sample, now time.Time, n uint64) {
	if r.pending == nil {
		r.pending = &Alert{Rule: r.Name(), Status: Firing, Began: now}
	}
	a := r.pending
	a.At, a.Sample = now, s
	a.Kills += n
	// Only a record that appeared since the last reading is this rise's.
	switch v := s.OOM.Victim; {
	case v.Known() && !v.Same(r.lastVictim):
		a.Victim = v
	case r.held.Known() && v.Same(r.held):
		a.Victim = r.held
	}
	// Whose process it was is the reader's judgement, never "the phase
	// that was running".
	a.Phase = ""
	if a.Victim.Owner == VictimOfPhase {
		a.Phase = a.Victim.Phase
	}
}

// Pushed forgets the kills a delivered push reported, or schedules a retry.
func (r *OOMRule) Pushed(a Alert, delivered bool, now time.Time) {
	if r.pending == nil {
		return
	}
	if delivered {
		r.pending, r.retryAt, r.backoff = nil, time.Time{}, 0
		return
	}
	r.backoff = backoff.Next(r.backoff, r.retry, r.repeat)
	r.retryAt = now.Add(r.backoff)
}

// State: the rule always pushes the next kill, so it is disarmed only in
// the sense that kills wait for a push that reached no target; Since is
// when the first of them happened.
func (r *OOMRule) State() RuleState {
	st := RuleState{Name: r.Name(), Armed: r.pending == nil, Undelivered: r.pending != nil}
	if r.pending != nil {
		st.Since = r.pending.Began
	}
	return st
}
