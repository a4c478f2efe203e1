package exporter

import (
	"context"
	"sync"
	"time"
)

// The swap history keeps HistorySamples samples, one per step: with the
// default step of 10 s that is the last hour, a few KiB, and enough for a
// chart that shows how swap filled.
const (
	DefaultHistoryStep = 10 * time.Second
	HistorySamples     = 360
)

// SwapSample is one point of the swap history.
type SwapSample struct {
	Time       time.Time `json:"time"`
	UsedRatio  float64   `json:"used_ratio"`
	UsedBytes  uint64    `json:"used_bytes"`
	TotalBytes uint64    `json:"total_bytes"`
}

// SwapHistory reads swap and remembers the latest reading and, bounded, the
// last hour of them for the status page. The watchdog reads through it, so
// the page costs no extra reads; without a watchdog, Run samples by itself.
// The scrape path never touches it.
type SwapHistory struct {
	procfs string
	step   time.Duration
	now    func() time.Time

	mu        sync.Mutex
	ring      []SwapSample // oldest at head once full
	head      int
	latest    SwapSample
	latestErr error
}

// NewSwapHistory keeps one sample per step (default DefaultHistoryStep).
func NewSwapHistory(procfs string, step time.Duration, now func() time.Time) *SwapHistory {
	if step <= 0 {
		step = DefaultHistoryStep
	}
	if now == nil {
		now = time.Now
	}
	return &SwapHistory{procfs: procfs, step: step, now: now, ring: make([]SwapSample, 0, HistorySamples)}
}

// Window is how far back the kept samples reach. It reads only what never
// changes (the ring's capacity is fixed), so it needs no lock while Read
// appends.
func (h *SwapHistory) Window() time.Duration { return h.step * HistorySamples }

// Read reads swap with ReadSwap and records it. A reading less than a step
// after the last kept sample only updates the latest figure.
func (h *SwapHistory) Read(ctx context.Context) (Swap, error) {
	s, err := ReadSwap(ctx, h.procfs)
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.latestErr = err
	if err != nil {
		return s, err
	}
	sample := SwapSample{Time: now, UsedRatio: s.UsedRatio, UsedBytes: s.UsedBytes, TotalBytes: s.TotalBytes}
	h.latest = sample
	if last, ok := h.lastLocked(); !ok || now.Sub(last.Time) >= h.step {
		h.appendLocked(sample)
	}
	return s, nil
}

// Run reads every step until ctx ends; use it when no watchdog reads.
func (h *SwapHistory) Run(ctx context.Context) {
	_, _ = h.Read(ctx)
	t := time.NewTicker(h.step)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = h.Read(ctx)
		}
	}
}

// Latest returns the newest reading, or the error of the newest attempt.
func (h *SwapHistory) Latest() (SwapSample, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest, h.latestErr
}

// Samples returns the kept samples, oldest first.
func (h *SwapHistory) Samples() []SwapSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]SwapSample, 0, len(h.ring))
	out = append(out, h.ring[h.head:]...)
	return append(out, h.ring[:h.head]...)
}

func (h *SwapHistory) lastLocked() (SwapSample, bool) {
	switch {
	case len(h.ring) == 0:
		return SwapSample{}, false
	case h.head == 0:
		return h.ring[len(h.ring)-1], true
	default:
		return h.ring[h.head-1], true
	}
}

func (h *SwapHistory) appendLocked(s SwapSample) {
	if len(h.ring) < cap(h.ring) {
		h.ring = append(h.ring, s)
		return
	}
	h.ring[h.head] = s
	h.head = (h.head + 1) % len(h.ring)
}
