package exporter

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestSwapHistoryRing(t *testing.T) {
	dir := t.TempDir()
	data, _ := os.ReadFile("testdata/procfs/swap54/meminfo")
	os.WriteFile(filepath.Join(dir, "meminfo"), data, 0o644)
	now := time.Date(2026, 4, 24, 0, 0, 0, 0, time.UTC)
	h := NewSwapHistory(dir, 10*time.Second, func() time.Time { return now })
	reads := 2*HistorySamples + 20 // every 5s: one kept per 10s, the newest HistorySamples
	for range reads {
		h.Read(context.Background())
		now = now.Add(5 * time.Second)
	}
	got := h.Samples()
	if len(got) != HistorySamples || h.Window() != time.Hour {
		t.Fatalf("%d samples over %s, want %d over an hour", len(got), h.Window(), HistorySamples)
	}
	for i := 1; i < len(got); i++ {
		if d := got[i].Time.Sub(got[i-1].Time); d != 10*time.Second {
			t.Errorf("samples %d and %d are %s apart, want 10s, oldest first", i-1, i, d)
		}
	}
	if last := got[len(got)-1].Time; !last.Equal(now.Add(-10 * time.Second)) {
		t.Errorf("newest kept sample at %s, want %s", last, now.Add(-10*time.Second))
	}
	if latest, err := h.Latest(); err != nil || !latest.Time.Equal(now.Add(-5*time.Second)) {
		t.Errorf("latest %v %v: the newest reading must be kept even between steps", latest.Time, err)
	}
}

// TestSwapHistoryConcurrentReaders is for -race: the page reads the history
// (Window, Samples, Latest) while the watchdog's poll appends to it. It once
// failed CI when Window read the ring unlocked.
func TestSwapHistoryConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	data, _ := os.ReadFile("testdata/procfs/swap54/meminfo")
	os.WriteFile(filepath.Join(dir, "meminfo"), data, 0o644)
	var tick atomic.Int64
	start := time.Date(2026, 4, 24, 0, 0, 0, 0, time.UTC)
	hist := NewSwapHistory(dir, time.Second, func() time.Time {
		return start.Add(time.Duration(tick.Add(1)) * time.Second)
	})
	const reads = 2 * HistorySamples // enough to fill the ring and wrap it
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range reads {
			if _, err := hist.Read(context.Background()); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for {
		select {
		case <-done:
			if got := len(hist.Samples()); got != HistorySamples {
				t.Errorf("%d samples after %d reads, want %d", got, reads, HistorySamples)
			}
			return
		default:
		}
		if w := hist.Window(); w != HistorySamples*time.Second {
			t.Fatalf("window %s, want %s", w, HistorySamples*time.Second)
		}
		_ = hist.Samples()
		_, _ = hist.Latest()
	}
}
