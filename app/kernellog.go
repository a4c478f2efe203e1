package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/exporter"
	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/phaseserver"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/statuspage"
	"github.com/lavender-ml/lavender/watchdog"
)

// kernelLog is the open kernel log, if any, and its metrics, which also
// say whether it is read and, if not, why.
type kernelLog struct {
	r       *kmsg.Reader // nil when not readable or not asked for
	metrics *exporter.KernelLog

	// handlers get every batch of faults, after the metrics.
	handlers []func([]kmsg.Fault)
	// pos keeps the device's position across a restart (serve); nil:
	// none is kept (exporter).
	pos *kernelLogPosition
}

// positionEvery is the least time between two saves of the kernel log's
// position: a restart after a crash reads again at most this much, never
// per record under a flood, and a log that does not move costs nothing. A
// graceful stop saves it too.
const positionEvery = time.Second

// status says whether the log is read, and if not, why, for the status
// page.
func (k *kernelLog) status() statuspage.KernelLogStatus {
	readable, why := k.metrics.Status()
	return statuspage.KernelLogStatus{Readable: readable, Why: why}
}

// openKernelLog opens the kernel log. Not readable (no root, no
// CAP_SYSLOG) is normal: lavender then works blind to kernel faults, says
// so once, and shows it in lavender_kernel_log_readable and on the status
// page.
//
// pos, when not nil, keeps the position of the kernel log device: the
// reader starts after the record the last run of serve on this boot read
// (from), and run saves where it got to.
func openKernelLog(path string, logger *slog.Logger, reg prometheus.Registerer, pos *kernelLogPosition, from kmsg.From) *kernelLog {
	k := &kernelLog{metrics: exporter.NewKernelLog(), pos: pos}
	reg.MustRegister(k.metrics)
	if path == "" {
		k.metrics.Unreadable("--path.kmsg is empty")
		return k
	}
	r, err := kmsg.OpenFrom(path, from)
	if err != nil {
		logger.Warn("kernel log not readable: OOM victims go unnamed, GPU and storage faults unseen", "err", err)
		k.metrics.Unreadable(err.Error())
		return k
	}
	k.r = r
	k.metrics.SetReadable(true, r.Stats)
	if pos != nil {
		r.OnResume(pos.onResume)
		// A start at the end is a position too: what is logged while
		// this run is down is read by the next.
		pos.saveNow(r, false)
	}
	return k
}

// victim names the newest OOM victim; zero without a log.
func (k *kernelLog) victim() kmsg.OOMVictim {
	if k == nil || k.r == nil {
		return kmsg.OOMVictim{}
	}
	return k.r.Victim()
}

// run reads the log until ctx ends, handing each batch of faults to every
// handler in turn. A log that fails is logged; lavender goes on blind.
func (k *kernelLog) run(ctx context.Context, logger *slog.Logger) {
	if k == nil || k.r == nil {
		return
	}
	if k.pos != nil {
		k.r.OnPosition(func(uint64) { k.pos.saveSoon(k.r) })
		// The stop: the faults handed on so far are read.
		defer k.pos.saveNow(k.r, true)
	}
	err := k.metrics.Read(ctx, k.r, logger, func(fs []kmsg.Fault) {
		for _, h := range k.handlers {
			h(fs)
		}
	})
	if err != nil {
		logger.Error("kernel log: reading stopped; GPU and storage faults are no longer seen", "err", err)
	}
}

func (k *kernelLog) close() {
	if k != nil && k.r != nil {
		k.r.Close()
	}
}

// watchFaults hands the log's GPU and storage faults to the watchdog, each
// with the phase it hit (see watchdog.PhasesOfFaults). A fault that can end
// its phase is noted in the exporter too, so a phase that fails of it soon
// after gets it as its reason.
func watchFaults(exp *phaseserver.Server, wd *watchdog.Watchdog, now func() time.Time) func([]kmsg.Fault) {
	if now == nil {
		now = time.Now
	}
	return func(faults []kmsg.Fault) {
		running, _ := exp.RunningPhase()
		hit := watchdog.PhasesOfFaults(faults, exp.PhaseOfPID, running)
		at := now()
		for _, kf := range hit {
			if kf.EndsPhase() {
				exp.NoteFault(kf.Phase, pushtext.FaultReason(kf), at)
			}
		}
		if len(hit) > 0 {
			wd.Faults(hit)
		}
	}
}
