//go:build cgo

package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// eventWaitMs bounds one wait on NVML's event set, a C call that Go
// cannot interrupt: it is how long a watcher may outlive its context or
// delay Close.
const eventWaitMs = 500

// eventRetry is the pause after a failed wait, so a broken event set does
// not spin.
const eventRetry = time.Second

// WatchXids registers every GPU for Xid events (and double-bit ECC
// errors where the GPU offers them) and delivers each event to fn, on
// the watcher's own goroutine, until ctx ends or the Reader is closed. It
// returns once the GPUs are registered: an error when none could be,
// else the running watch, whose Skipped lists the GPUs left out. fn must
// return quickly: events wait in the driver meanwhile.
//
// The kernel log carries the same Xids; a caller that reads both passes
// every report to one XidDedup and acts on those it calls first.
func (r *Reader) WatchXids(ctx context.Context, fn func(XidEvent)) (*XidWatch, error) {
	if r == nil {
		return nil, ErrClosed
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	devs := make([]handle, len(r.devs))
	copy(devs, r.devs)
	r.watchers.Add(1)
	r.mu.Unlock()

	set, ret := r.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		r.watchers.Done()
		return nil, fmt.Errorf("nvml.EventSetCreate: %w", ret)
	}
	var skipped []error
	registered := 0
	for _, dh := range devs {
		if dh.h == nil {
			skipped = append(skipped, fmt.Errorf("gpu %d: no NVML handle", dh.id.Index))
			continue
		}
		ret := dh.h.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError, set)
		if ret == nvml.ERROR_NOT_SUPPORTED {
			// NOT_SUPPORTED means some of the types; Xids alone may do.
			ret = dh.h.RegisterEvents(nvml.EventTypeXidCriticalError, set)
		}
		if ret != nvml.SUCCESS {
			skipped = append(skipped, fmt.Errorf("gpu %d: RegisterEvents: %w", dh.id.Index, ret))
			continue
		}
		registered++
	}
	if registered == 0 {
		set.Free()
		r.watchers.Done()
		return nil, fmt.Errorf("no GPU takes NVML Xid events: %w", errors.Join(skipped...))
	}
	w := &XidWatch{Skipped: errors.Join(skipped...), done: make(chan struct{})}
	go func() {
		defer r.watchers.Done()
		defer close(w.done)
		defer set.Free()
		r.watch(ctx, set, devs, fn)
	}()
	return w, nil
}

func (r *Reader) watch(ctx context.Context, set nvml.EventSet, devs []handle, fn func(XidEvent)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.done:
			return
		default:
		}
		ev, ret := set.Wait(eventWaitMs)
		switch ret {
		case nvml.SUCCESS:
			if e, ok := toXidEvent(ev, devs, r.now()); ok {
				fn(e)
			}
		case nvml.ERROR_TIMEOUT:
		default:
			// GPU_IS_LOST from a GPU in the set, or an interrupted wait:
			// the others may still report, so wait on after a pause.
			select {
			case <-ctx.Done():
				return
			case <-r.done:
				return
			case <-time.After(eventRetry):
			}
		}
	}
}

// toXidEvent names the GPU an event came from by its handle, falling back
// to its UUID when NVML hands a handle of its own.
func toXidEvent(ev nvml.EventData, devs []handle, now time.Time) (XidEvent, bool) {
	e := XidEvent{Time: now, Index: -1}
	switch {
	case ev.EventType&nvml.EventTypeXidCriticalError != 0:
		e.Kind, e.Xid = EventXid, ev.EventData
	case ev.EventType&nvml.EventTypeDoubleBitEccError != 0:
		e.Kind = EventDoubleBitECC
	default:
		return e, false
	}
	if ev.Device == nil {
		return e, true
	}
	for _, dh := range devs {
		if dh.h != nil && dh.h == ev.Device {
			e.Index, e.BusID, e.UUID = dh.id.Index, dh.id.BusID, dh.id.UUID
			return e, true
		}
	}
	if uuid, ret := ev.Device.GetUUID(); ret == nvml.SUCCESS {
		for _, dh := range devs {
			if dh.id.UUID == uuid {
				e.Index, e.BusID, e.UUID = dh.id.Index, dh.id.BusID, dh.id.UUID
				return e, true
			}
		}
		e.UUID = uuid
	}
	return e, true
}
