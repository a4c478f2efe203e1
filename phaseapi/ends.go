package phaseapi

import "time"

// PhaseEnd is one end of one phase, as the phase server recorded it. Ends
// are events, not states: a phase that fails and starts again at once
// leaves its failure here even though its table entry is running again by
// the next poll, so the watchdog reads these to push every end. It is not
// on the wire: the server hands ends to the watchdog in the same process.
type PhaseEnd struct {
	// Seq numbers the ends of the server's life, from 1, in the order they
	// came; a rule pushes those above the highest it has seen.
	Seq     uint64
	Phase   string
	Status  string // StatusOK, StatusFailed or StatusUnknown
	Reason  string
	Started time.Time
	Ended   time.Time
	// Died is set when the server ended the phase itself: its process
	// (PID) was gone and no end had come. With StatusUnknown it was gone
	// at the server's first looks, having ended while no server watched.
	Died bool
	PID  int64
	// Outside is set while the reason is what a rank sees when another
	// one crashed (a signal the launcher sent, a peer's connection
	// reset): the crash itself may still come, within a minute, and
	// replace it.
	Outside bool
	// Loss is the phase's last training loss, nil if it reported none: a
	// phase that ends ok with a NaN loss diverged all the same.
	Loss *Loss
}

// Duration is how long the phase ran.
func (e PhaseEnd) Duration() time.Duration { return max(e.Ended.Sub(e.Started), 0) }
