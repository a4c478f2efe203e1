//go:build cgo

package gpu

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// eventServer is a test server whose GPUs register on one fake event set;
// register answers each GPU's RegisterEvents.
func eventServer(t *testing.T, n int, register func(i int, mask uint64) nvml.Return) (*server.Server, *fakeEvents) {
	srv := testServer(n)
	set := newFakeEvents()
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	for i, dev := range srv.Devices {
		dev.(*server.Device).RegisterEventsFunc = func(mask uint64, s nvml.EventSet) nvml.Return {
			if s != set {
				t.Errorf("gpu %d registered on another set", i)
			}
			if register != nil {
				return register(i, mask)
			}
			return nvml.SUCCESS
		}
	}
	return srv, set
}

type collected struct {
	mu     sync.Mutex
	events []XidEvent
}

func (c *collected) add(e XidEvent) { c.mu.Lock(); c.events = append(c.events, e); c.mu.Unlock() }

func (c *collected) wait(t *testing.T, n int) []XidEvent {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		if len(c.events) >= n {
			out := append([]XidEvent(nil), c.events...)
			c.mu.Unlock()
			return out
		}
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("fewer than %d events in 5 s", n)
	return nil
}

func TestWatchXidsDeliversEvents(t *testing.T) {
	var masks sync.Map
	srv, set := eventServer(t, 4, func(i int, mask uint64) nvml.Return {
		masks.Store(i, mask)
		return nvml.SUCCESS
	})
	when := time.Date(2026, 12, 3, 4, 5, 6, 0, time.UTC)
	r := openTest(t, srv, Options{Now: func() time.Time { return when }})
	var got collected
	w, err := r.WatchXids(t.Context(), got.add)
	if err != nil || w.Skipped != nil {
		t.Fatalf("WatchXids: %v, skipped %v", err, w.Skipped)
	}
	masks.Range(func(k, v any) bool {
		if v.(uint64) != nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError {
			t.Errorf("gpu %v registered %#x", k, v)
		}
		return true
	})
	// A handle NVML made anew for the event: known by its UUID.
	stranger := &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return testUUID(3), nvml.SUCCESS }}
	unknown := &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return "GPU-unknown", nvml.SUCCESS }}
	set.ch <- nvml.EventData{Device: srv.Devices[2], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	set.ch <- nvml.EventData{Device: srv.Devices[0], EventType: nvml.EventTypeDoubleBitEccError}
	set.ch <- nvml.EventData{Device: srv.Devices[1], EventType: nvml.EventTypePState} // not asked for: dropped
	set.ch <- nvml.EventData{Device: stranger, EventType: nvml.EventTypeXidCriticalError, EventData: 48}
	set.ch <- nvml.EventData{Device: unknown, EventType: nvml.EventTypeXidCriticalError, EventData: 999}
	events := got.wait(t, 4)
	want := []XidEvent{
		{Time: when, Kind: EventXid, Index: 2, BusID: "0000:3a:00", UUID: testUUID(2), Xid: 79},
		{Time: when, Kind: EventDoubleBitECC, Index: 0, BusID: "0000:18:00", UUID: testUUID(0)},
		{Time: when, Kind: EventXid, Index: 3, BusID: "0000:5d:00", UUID: testUUID(3), Xid: 48},
		{Time: when, Kind: EventXid, Index: -1, UUID: "GPU-unknown", Xid: 999},
	}
	if len(events) != len(want) {
		t.Fatalf("events %+v", events)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, events[i], want[i])
		}
	}
}

func TestWatchXidsStopsWithItsContext(t *testing.T) {
	srv, set := eventServer(t, 2, nil)
	r := openTest(t, srv, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	w, err := r.WatchXids(ctx, func(XidEvent) {})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("watcher still running 5 s after its context ended")
	}
	if d := time.Since(start); d > eventWaitMs*time.Millisecond+time.Second {
		t.Errorf("watcher took %v to stop", d)
	}
	if !set.isFreed() {
		t.Error("event set not freed")
	}
	// The Reader lives on.
	if s := r.Snapshot(); s.Err != nil {
		t.Error(s.Err)
	}
}

func TestCloseStopsWatchers(t *testing.T) {
	srv, set := eventServer(t, 1, nil)
	r, err := open(srv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.WatchXids(t.Context(), func(XidEvent) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for the watcher before shutting NVML down.
	select {
	case <-w.Done():
	default:
		t.Error("Close returned with the watcher running")
	}
	if !set.isFreed() {
		t.Error("event set not freed before Shutdown")
	}
	if _, err := r.WatchXids(t.Context(), func(XidEvent) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("WatchXids after Close: %v", err)
	}
}

func TestWatchXidsRegistration(t *testing.T) {
	// GPU 0 takes Xids but not ECC events, GPU 1 takes none: the watch
	// runs on GPU 0 and says GPU 1 was skipped.
	srv, _ := eventServer(t, 2, func(i int, mask uint64) nvml.Return {
		switch {
		case i == 0 && mask == nvml.EventTypeXidCriticalError:
			return nvml.SUCCESS
		case i == 1 && mask == nvml.EventTypeXidCriticalError:
			return nvml.ERROR_UNKNOWN
		}
		return nvml.ERROR_NOT_SUPPORTED
	})
	r := openTest(t, srv, Options{})
	w, err := r.WatchXids(t.Context(), func(XidEvent) {})
	if err != nil {
		t.Fatal(err)
	}
	if w.Skipped == nil || !errors.Is(w.Skipped, nvml.ERROR_UNKNOWN) {
		t.Errorf("skipped: %v", w.Skipped)
	}
	t.Logf("skipped: %v", w.Skipped)

	// No GPU takes events: an error, and no watcher left behind.
	srv2, set2 := eventServer(t, 2, func(int, uint64) nvml.Return { return nvml.ERROR_NOT_SUPPORTED })
	r2 := openTest(t, srv2, Options{})
	if w, err := r2.WatchXids(t.Context(), func(XidEvent) {}); err == nil || w != nil {
		t.Fatalf("WatchXids with no GPU registered: %v, %v", w, err)
	} else {
		t.Logf("error: %v", err)
	}
	if !set2.isFreed() {
		t.Error("event set not freed")
	}
	if err := r2.Close(); err != nil {
		t.Error(err)
	}
}

func TestWatchXidsRetriesAfterAFailedWait(t *testing.T) {
	srv, set := eventServer(t, 1, nil)
	var mu sync.Mutex
	failed := 0
	wait := set.WaitFunc
	set.WaitFunc = func(ms uint32) (nvml.EventData, nvml.Return) {
		mu.Lock()
		first := failed == 0
		failed++
		mu.Unlock()
		if first {
			return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST
		}
		return wait(ms)
	}
	r := openTest(t, srv, Options{})
	var got collected
	if _, err := r.WatchXids(t.Context(), got.add); err != nil {
		t.Fatal(err)
	}
	set.ch <- nvml.EventData{Device: srv.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 13}
	if e := got.wait(t, 1); e[0].Xid != 13 {
		t.Errorf("event %+v", e[0])
	}
}
