package gpu

import (
	"sync"
	"testing"
	"time"
)

func TestXidDedup(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	d := XidDedup{Window: 10 * time.Second}
	steps := []struct {
		bus  string
		xid  uint64
		at   time.Duration
		want bool
		why  string
	}{
		{"00000000:3B:00.0", 79, 0, true, "NVML's event comes first"},
		{"0000:3b:00", 79, 2 * time.Second, false, "the kernel log's record of it, in the kernel log's form"},
		{"0000:3b:00", 48, 2 * time.Second, true, "another Xid on the same GPU"},
		{"0000:86:00", 79, 2 * time.Second, true, "the same Xid on another GPU"},
		{"0000:3b:00", 79, 9 * time.Second, false, "a repeat inside the window"},
		{"0000:3b:00", 79, 10 * time.Second, true, "the window runs from the first report"},
		{"0000:86:00", 79, -time.Second, false, "the other source's report, received just before"},
		{"not a bus id", 13, 0, true, "a name NormalizeBusID cannot read is kept as given"},
		{"not a bus id", 13, time.Second, false, "and matches itself"},
	}
	for _, s := range steps {
		if got := d.First(s.bus, s.xid, t0.Add(s.at)); got != s.want {
			t.Errorf("%s: First(%q, %d, +%v) = %v", s.why, s.bus, s.xid, s.at, got)
		}
	}
	// Old entries are forgotten.
	d.First("0000:01:00", 1, t0.Add(time.Hour))
	d.mu.Lock()
	n := len(d.seen)
	d.mu.Unlock()
	if n != 1 {
		t.Errorf("%d entries kept an hour later, want 1", n)
	}
}

func TestXidDedupDefaultWindow(t *testing.T) {
	var d XidDedup
	t0 := time.Unix(0, 0)
	if !d.First("0000:3b:00", 79, t0) || d.First("0000:3b:00", 79, t0.Add(DefaultDedupWindow-time.Nanosecond)) ||
		!d.First("0000:3b:00", 79, t0.Add(DefaultDedupWindow)) {
		t.Error("the zero XidDedup does not use DefaultDedupWindow")
	}
}

// Two sources reporting one Xid at once: exactly one is first.
func TestXidDedupConcurrent(t *testing.T) {
	var d XidDedup
	now := time.Now()
	var mu sync.Mutex
	firsts := 0
	var wg sync.WaitGroup
	for _, bus := range []string{"00000000:3B:00.0", "0000:3b:00", "PCI:0000:3b:00", "0000:3b:00.0"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d.First(bus, 79, now) {
				mu.Lock()
				firsts++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firsts != 1 {
		t.Errorf("%d reports were first, want 1", firsts)
	}
}
