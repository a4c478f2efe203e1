//go:build cgo

package gpu

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// stuckGPU is a test server whose GPU 1 blocks in GetPowerUsage, as a GPU
// in a bad state holds an NVML call, from block until release.
type stuckGPU struct {
	r        *Reader
	advance  func(time.Duration)
	log      *testkit.SyncBuffer
	block    atomic.Bool
	release  chan struct{}
	released sync.Once
	passes   func() int // how many passes GPU 0 has been read by
}

func newStuckGPU(t *testing.T, timeout time.Duration) *stuckGPU {
	t.Helper()
	sg := &stuckGPU{release: make(chan struct{}), log: &testkit.SyncBuffer{}}
	srv := testServer(2)
	dev1 := srv.Devices[1].(*server.Device)
	power := dev1.GetPowerUsageFunc
	dev1.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if sg.block.Load() {
			<-sg.release
		}
		return power()
	}
	dev0 := srv.Devices[0].(*server.Device)
	sg.passes = func() int { return len(dev0.GetUtilizationRatesCalls()) }
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	sg.advance = func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	sg.r = openTest(t, srv, Options{Now: clock, Timeout: timeout, Logger: slog.New(slog.NewTextHandler(sg.log, nil))})
	t.Cleanup(sg.unblock) // before the Reader's Close, which runs first otherwise
	return sg
}

func (sg *stuckGPU) unblock() { sg.released.Do(func() { close(sg.release) }) }

// snapshots calls Snapshot from n callers at once and returns what each
// got, failing the test if any is still waiting after limit.
func (sg *stuckGPU) snapshots(t *testing.T, n int, limit time.Duration) []Snapshot {
	t.Helper()
	out := make([]Snapshot, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = sg.r.Snapshot() }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("Snapshot still blocked after %s behind a stuck NVML call", limit)
	}
	return out
}

// A pass stuck in one NVML call answers every caller by its deadline with
// the last complete pass marked stuck, answers at once after that, starts
// no second pass, is logged once, and is exported as such; when the call
// returns, passes go on.
func TestStuckPassAnswersByItsDeadline(t *testing.T) {
	const timeout = 200 * time.Millisecond
	sg := newStuckGPU(t, timeout)
	first := sg.r.Snapshot()
	if first.Err != nil || len(first.Devices) != 2 {
		t.Fatalf("the healthy pass: %d devices, err %v", len(first.Devices), first.Err)
	}

	sg.block.Store(true)
	sg.advance(DefaultTTL)
	start := time.Now()
	for i, s := range sg.snapshots(t, 2, 5*time.Second) {
		var stuck *StuckError
		if !errors.Is(s.Err, ErrStuck) || !errors.As(s.Err, &stuck) {
			t.Fatalf("caller %d: err %v, want ErrStuck", i, s.Err)
		}
		if stuck.At != "gpu 1: GetPowerUsage" || stuck.For < timeout {
			t.Errorf("caller %d: %+v", i, stuck)
		}
		if len(s.Devices) != 2 || !s.Time.Equal(first.Time) || s.Devices[1].PowerW != first.Devices[1].PowerW {
			t.Errorf("caller %d: not the last complete pass: %+v", i, s)
		}
	}
	if waited := time.Since(start); waited > timeout+time.Second {
		t.Errorf("callers waited %s for a deadline of %s", waited, timeout)
	}
	// Past the deadline a caller waits for nothing, and no second pass
	// starts behind the stuck one.
	for range 3 {
		sg.advance(DefaultTTL)
		start := time.Now()
		if s := sg.r.Snapshot(); !errors.Is(s.Err, ErrStuck) {
			t.Fatalf("err %v", s.Err)
		}
		if waited := time.Since(start); waited >= timeout {
			t.Errorf("a caller after the deadline waited %s", waited)
		}
	}
	if n := sg.passes(); n != 2 {
		t.Errorf("%d passes started, want 2 (the healthy one and the stuck one)", n)
	}
	if n := strings.Count(sg.log.String(), "level=WARN"); n != 1 {
		t.Errorf("the stall logged %d times, want once:\n%s", n, sg.log)
	}

	c := NewCollector(sg.r, nil)
	want := `
# HELP lavender_gpu_scrape_stuck 1 while an NVML pass has run past its deadline without returning (a GPU or the driver stuck): the GPUs' readings are absent, their info and lost series are the last complete pass's, and the duration is how long the pass has run.
# TYPE lavender_gpu_scrape_stuck gauge
lavender_gpu_scrape_stuck 1
# HELP lavender_gpu_scrape_success 1 when the NVML pass read every supported reading of every GPU that is not lost, 0 when a call failed or the pass is stuck.
# TYPE lavender_gpu_scrape_success gauge
lavender_gpu_scrape_success 0
# HELP lavender_gpu_telemetry_enabled 1 when GPU telemetry reads NVML; 0 with the reason (no_cgo, no_driver, no_gpu, disabled, nvml_error, closed) when it does not.
# TYPE lavender_gpu_telemetry_enabled gauge
lavender_gpu_telemetry_enabled{reason=""} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "lavender_gpu_scrape_stuck", "lavender_gpu_scrape_success", "lavender_gpu_telemetry_enabled"); err != nil {
		t.Error(err)
	}
	for name, n := range map[string]int{"lavender_gpu_lost": 2, "lavender_gpu_info": 2, "lavender_gpu_power_watts": 0, "lavender_gpu_utilization_ratio": 0} {
		if got := testutil.CollectAndCount(c, name); got != n {
			t.Errorf("%s: %d series while stuck, want %d", name, got, n)
		}
	}

	sg.block.Store(false)
	sg.unblock()
	testkit.WaitFor(t, 5*time.Second, func() bool { return strings.Contains(sg.log.String(), "NVML answers again") }, "the stuck pass to return")
	// The pass that returned is as old as its start: the next caller
	// gets a new one.
	s := sg.r.Snapshot()
	if s.Err != nil || len(s.Devices) != 2 || !s.Devices[1].Has(FieldPower) || sg.passes() != 3 {
		t.Fatalf("after the stall: err %v, %d passes, %+v", s.Err, sg.passes(), s.Devices)
	}
}

// With no complete pass yet, a stuck one answers ErrStuck with no GPUs.
func TestStuckFirstPass(t *testing.T) {
	sg := newStuckGPU(t, 100*time.Millisecond)
	sg.block.Store(true)
	s := sg.snapshots(t, 1, 5*time.Second)[0]
	if !errors.Is(s.Err, ErrStuck) || s.Devices != nil {
		t.Errorf("err %v, devices %v", s.Err, s.Devices)
	}
}

// Close does not wait for a stuck pass past its deadline, nor shut NVML
// down under it.
func TestCloseWhileStuck(t *testing.T) {
	sg := newStuckGPU(t, 100*time.Millisecond)
	sg.block.Store(true)
	sg.snapshots(t, 1, 5*time.Second)
	done := make(chan error, 1)
	go func() { done <- sg.r.Close() }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStuck) {
			t.Errorf("Close: %v, want ErrStuck", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waiting for a stuck pass after 5s")
	}
	if n := len(sg.r.lib.(*server.Server).ShutdownCalls()); n != 0 {
		t.Errorf("nvml.Shutdown called %d times under a stuck pass", n)
	}
	if s := sg.r.Snapshot(); !errors.Is(s.Err, ErrClosed) {
		t.Errorf("after Close: %v", s.Err)
	}
}
