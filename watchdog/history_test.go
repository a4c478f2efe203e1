package watchdog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

func TestHistoryKeepsOneSamplePerStep(t *testing.T) {
	h := NewHistory(10 * time.Second)
	if s, err := h.Latest(); err != nil || !s.Time.IsZero() || len(h.Samples()) != 0 {
		t.Fatalf("empty history: %+v %v %d", s, err, len(h.Samples()))
	}
	phases := []phaseapi.Phase{{Name: "Pretrain", Status: phaseapi.StatusActive}}
	for i, at := range []time.Duration{0, 5 * time.Second, 10 * time.Second, 19 * time.Second, 21 * time.Second} {
		h.Record(Sample{Time: t0.Add(at), Swap: swapOf(float64(i) / 10), Phases: phases})
	}
	var kept []time.Duration
	for _, s := range h.Samples() {
		kept = append(kept, s.Time.Sub(t0))
		if s.Phases != nil {
			t.Errorf("the ring kept the phases of %s", s.Time)
		}
	}
	if want := []time.Duration{0, 10 * time.Second, 21 * time.Second}; !equalDurations(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	latest, err := h.Latest()
	if err != nil || !latest.Time.Equal(t0.Add(21*time.Second)) || len(latest.Phases) != 1 {
		t.Errorf("latest %+v, %v: want the newest reading with its phases", latest, err)
	}
	if h.Window() != HistorySamples*10*time.Second || h.Step() != 10*time.Second {
		t.Errorf("window %s step %s", h.Window(), h.Step())
	}
	if NewHistory(0).Step() != DefaultStep {
		t.Error("step 0 is not the default")
	}
}

func TestHistoryWrapsOldestFirst(t *testing.T) {
	h := NewHistory(time.Second)
	const n = HistorySamples + 25
	for i := range n {
		h.Record(Sample{Time: t0.Add(time.Duration(i) * time.Second)})
	}
	got := h.Samples()
	if len(got) != HistorySamples {
		t.Fatalf("%d samples, want %d", len(got), HistorySamples)
	}
	for i, s := range got {
		if want := t0.Add(time.Duration(n-HistorySamples+i) * time.Second); !s.Time.Equal(want) {
			t.Fatalf("sample %d at %s, want %s", i, s.Time, want)
		}
	}
}

func TestHistoryLatestError(t *testing.T) {
	h := NewHistory(time.Second)
	h.Record(Sample{Time: t0, Swap: swapOf(0.3)})
	boom := errors.New("boom")
	h.RecordError(boom)
	if _, err := h.Latest(); err != boom {
		t.Errorf("latest error %v, want boom", err)
	}
	if len(h.Samples()) != 1 {
		t.Error("an error lost the kept samples")
	}
	h.Record(Sample{Time: t0.Add(time.Second)})
	if _, err := h.Latest(); err != nil {
		t.Errorf("error %v after a good reading", err)
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHistoryReadWhilePolling is for -race: the page reads the history
// (Window, Samples, Latest) and the watchdog's State while the watchdog
// polls, records and pushes. The swap history once failed CI when Window
// read the ring unlocked.
func TestHistoryReadWhilePolling(t *testing.T) {
	hist := NewHistory(time.Second)
	var tick atomic.Int64
	rules, err := NewRules(DefaultRuleFlags)
	if err != nil {
		t.Fatal(err)
	}
	wd, err := New(Config{
		Rules:   rules,
		Push:    PushFunc(func(context.Context, []Alert) (int, int) { return 1, 0 }),
		History: hist,
		Read: func(context.Context) (Sample, error) {
			// Swap and pressure cross their lines and fall back every few
			// polls, and a kill now and then, so rules change state too.
			i := tick.Load()
			return Sample{
				Swap:     swapOf(float64(i%10) / 10),
				Pressure: Pressure{Available: true, Some: float64(i%7) / 10},
				OOM:      OOM{Available: true, Kills: uint64(i / 50)},
			}, nil
		},
		Now: func() time.Time { return t0.Add(time.Duration(tick.Add(1)) * time.Second) },
	})
	if err != nil {
		t.Fatal(err)
	}

	const polls = 2 * HistorySamples // enough to fill the ring and wrap it
	done, reading := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		<-reading // so the reads overlap the polls however the goroutines are scheduled
		for range polls {
			wd.Poll(context.Background())
		}
	}()
	// The race detector judges happens-before, not timing: reads after the
	// first are unordered with the polls, so an unlocked access is caught
	// however the two goroutines happen to interleave.
	reads := 0
	for {
		select {
		case <-done:
			if got := len(hist.Samples()); got != HistorySamples {
				t.Errorf("%d samples after %d polls, want %d", got, polls, HistorySamples)
			}
			return
		default:
		}
		if w := hist.Window(); w != HistorySamples*time.Second {
			t.Fatalf("window %s, want %s", w, HistorySamples*time.Second)
		}
		_ = hist.Samples()
		_, _ = hist.Latest()
		_ = wd.State()
		if reads++; reads == 1 {
			close(reading)
		}
	}
}
