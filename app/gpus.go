package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/kmsg"
)

// gpus is the open NVML reader, if any, and why there is none.
type gpus struct {
	r   *gpu.Reader // nil when telemetry is off
	off string      // why it is off, for the status page; "" when on
}

// openGPUs opens NVML unless told not to, and registers the GPU collector
// either way, so lavender_gpu_telemetry_enabled says whether and why not.
// No driver, no GPU or a build without cgo is a normal host: one info
// line, and nothing else changes.
func openGPUs(on bool, env Env, reg prometheus.Registerer) (*gpus, error) {
	var (
		r   *gpu.Reader
		err error
	)
	if on {
		r, err = gpu.Open(gpu.Options{Now: env.Clock, Logger: env.Logger})
	} else {
		err = gpu.ErrDisabled
	}
	g := &gpus{r: r}
	switch {
	case err == nil:
		env.Logger.Info("GPU telemetry on", "gpus", r.GPUs())
	case errors.Is(err, gpu.ErrNoCgo), errors.Is(err, gpu.ErrNoDriver), errors.Is(err, gpu.ErrNoGPU), errors.Is(err, gpu.ErrDisabled):
		env.Logger.Info("GPU telemetry off", "reason", err.Error())
		g.off = err.Error()
	default:
		env.Logger.Warn("GPU telemetry off: NVML failed to start", "err", err)
		g.off = "NVML failed to start: " + err.Error()
	}
	var src gpu.Source
	if r != nil {
		src = r
	}
	if err := reg.Register(gpu.NewCollector(src, err)); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// read is the watchdog's view of the GPUs: the pass's devices, or why
// there are none (telemetry off, or the pass failed).
func (g *gpus) read() ([]gpu.Device, error) {
	if g.r == nil {
		return nil, errors.New(g.off)
	}
	snap := g.r.Snapshot()
	if snap.Err != nil {
		// A stuck pass hands back the last complete one's devices, for
		// the status page; the watchdog judges none of them.
		return nil, snap.Err
	}
	return snap.Devices, nil
}

// snapshot is the reader's last pass, for the status page; nil without one.
func (g *gpus) snapshot() func() gpu.Snapshot {
	if g == nil || g.r == nil {
		return nil
	}
	return g.r.Snapshot
}

func (g *gpus) close() {
	if g != nil && g.r != nil {
		g.r.Close()
	}
}

// watchXids hands NVML's Xid events to handle as the kernel log's faults
// are handed, until ctx ends: a second source, so that a host whose kernel
// log lavender may not read (an unprivileged container) still gets its
// Xid pushes. dedup folds an Xid both sources report into one.
func (g *gpus) watchXids(ctx context.Context, dedup *gpu.XidDedup, handle func([]kmsg.Fault), logger *slog.Logger) {
	if g == nil || g.r == nil {
		return
	}
	w, err := g.r.WatchXids(ctx, func(e gpu.XidEvent) {
		if e.Kind != gpu.EventXid || !dedup.First(e.BusID, e.Xid, e.Time) {
			return
		}
		handle([]kmsg.Fault{{Kind: kmsg.Xid, GPU: e.BusID, Xid: int(e.Xid), Message: "reported by NVML"}})
	})
	if err != nil {
		logger.Info("NVML Xid events not watched: Xids come from the kernel log alone", "err", err)
		return
	}
	if w.Skipped != nil {
		logger.Info("NVML Xid events not watched on some GPUs", "err", w.Skipped)
	}
}

// firstXids passes on the faults of a kernel-log batch but the Xids NVML
// reported already (or that an earlier batch did).
func firstXids(dedup *gpu.XidDedup, now func() time.Time, handle func([]kmsg.Fault)) func([]kmsg.Fault) {
	return func(faults []kmsg.Fault) {
		kept := faults[:0:0]
		for _, f := range faults {
			if f.Kind == kmsg.Xid && !dedup.First(f.GPU, uint64(f.Xid), now()) {
				continue
			}
			kept = append(kept, f)
		}
		if len(kept) > 0 {
			handle(kept)
		}
	}
}
