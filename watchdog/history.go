package watchdog

import (
	"sync"
	"time"

	"github.com/lavender-ml/lavender/internal/ring"
)

// The history keeps HistorySamples samples, one per step: with the default
// step of 10 s that is the last hour, a few tens of KiB, and enough for a
// chart that shows how swap and pressure rose.
const (
	DefaultStep    = 10 * time.Second
	HistorySamples = 360
)

// History remembers the newest reading and, bounded, one reading per step
// for the status page. The watchdog records into it on every poll, so the
// page costs no reads of its own. It is safe for concurrent use: every
// method that touches the ring takes the lock (the page once raced a poll
// by reading the ring's capacity unlocked).
type History struct {
	step time.Duration

	mu        sync.Mutex
	ring      *ring.Ring[Sample] // Phases dropped
	latest    Sample
	latestErr error
}

// NewHistory keeps one sample per step (0: DefaultStep).
func NewHistory(step time.Duration) *History {
	if step <= 0 {
		step = DefaultStep
	}
	return &History{step: step, ring: ring.New[Sample](HistorySamples)}
}

// Step is the least time between two kept samples.
func (h *History) Step() time.Duration { return h.step }

// Window is how far back the kept samples reach. It is the step times a
// constant and reads no ring, so it needs no lock.
func (h *History) Window() time.Duration { return h.step * HistorySamples }

// Record makes s the latest reading, and keeps it in the ring if a step has
// passed since the last kept sample. The ring drops the phase table: 360
// copies of up to 64 phases would cost megabytes, and the page reads the
// phases from the phase server. It drops the disks and the GPUs (with
// their process lists) for the same reason: the latest sample has them.
func (h *History) Record(s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.latest, h.latestErr = s, nil
	if last, ok := h.ring.Newest(); ok && s.Time.Sub(last.Time) < h.step {
		return
	}
	s.Phases, s.Disks, s.UnreadableDisks = nil, nil, nil
	s.GPUs, s.PhaseGPUs = nil, nil
	h.ring.Push(s)
}

// RecordError notes that the newest reading failed; Latest returns err
// until a reading succeeds. The kept samples stay.
func (h *History) RecordError(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.latestErr = err
}

// Latest returns the newest reading, or the error of the newest attempt.
// Before the first reading it returns a zero Sample (Time.IsZero()).
func (h *History) Latest() (Sample, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest, h.latestErr
}

// Samples returns the kept samples, oldest first, in a new slice.
func (h *History) Samples() []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ring.OldestFirst()
}
