package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lavender/exporter"
	"lavender/kmsg"
	"lavender/pushtext"
	"lavender/statuspage"
	"lavender/watchdog"
)

// kernelLogFlags point the kernel log reader at /dev/kmsg, or for tests at
// a FIFO or file of its records.
type kernelLogFlags struct {
	KmsgPath string `name:"path.kmsg" default:"${kmsg_path}" help:"Kernel log to read OOM victims, GPU Xid errors and storage faults from, where readable (root or CAP_SYSLOG); a FIFO or file of /dev/kmsg records also works. Empty: none."`
}

// kernelLog is the open kernel log, or why there is none, and its metrics.
type kernelLog struct {
	r       *kmsg.Reader // nil when not readable or not asked for
	metrics *exporter.KernelLog

	// handlers get every batch of faults, after the metrics.
	handlers []func([]kmsg.Fault)

	mu  sync.Mutex
	err error // why not readable (or no longer); nil when asked for none
}

// status says whether the log is read, and if not, why, for the status
// page.
func (k *kernelLog) status() statuspage.KernelLogStatus {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.err != nil:
		return statuspage.KernelLogStatus{Why: k.err.Error()}
	case k.r == nil:
		return statuspage.KernelLogStatus{Why: "--path.kmsg is empty"}
	}
	return statuspage.KernelLogStatus{Readable: true}
}

// openKernelLog opens the kernel log. Not readable (no root, no
// CAP_SYSLOG) is normal: lavender then works blind to kernel faults, says
// so once, and shows it in lavender_kernel_log_readable and on the status
// page.
func (f *kernelLogFlags) openKernelLog(logger *slog.Logger, reg prometheus.Registerer) *kernelLog {
	k := &kernelLog{metrics: exporter.NewKernelLog()}
	reg.MustRegister(k.metrics)
	if f.KmsgPath == "" {
		return k
	}
	r, err := kmsg.Open(f.KmsgPath)
	if err != nil {
		logger.Warn("kernel log not readable: OOM victims go unnamed, GPU and storage faults unseen", "err", err)
		k.err = err
		return k
	}
	k.r = r
	k.metrics.SetReadable(true, r.Stats)
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
	err := k.r.Run(ctx, func(fs []kmsg.Fault) {
		k.metrics.Observe(fs)
		for _, h := range k.handlers {
			h(fs)
		}
	})
	if err != nil {
		logger.Error("kernel log: reading stopped; GPU and storage faults are no longer seen", "err", err)
		k.mu.Lock()
		k.err = err
		k.mu.Unlock()
		k.metrics.SetReadable(false, k.r.Stats)
	}
}

func (k *kernelLog) close() {
	if k != nil && k.r != nil {
		k.r.Close()
	}
}

// watchFaults hands the log's GPU and storage faults to the watchdog, each
// with the phase it hit: the phase whose process (or a descendant of it)
// the record names, read from procfs at once, or for a record that names
// no process the phase running then. A serious fault is noted in the
// exporter too, so a phase that fails of it soon after gets it as its
// reason.
func watchFaults(exp *exporter.Exporter, wd *watchdog.Watchdog, now func() time.Time) func([]kmsg.Fault) {
	if now == nil {
		now = time.Now
	}
	return func(faults []kmsg.Fault) {
		byPID := map[int]string{} // one ancestry walk per pid and batch
		running := ""
		if p, ok := runningPhase(exp); ok {
			running = p
		}
		var out []watchdog.KernelFault
		at := now()
		for _, f := range faults {
			if f.Kind == kmsg.OOMKill {
				continue // the OOM rule names kills, from the kill counter
			}
			kf := watchdog.KernelFault{Fault: f}
			if f.PID > 0 {
				name, seen := byPID[f.PID]
				if !seen {
					name, _ = exp.PhaseOfPID(f.PID)
					byPID[f.PID] = name
				}
				kf.Phase, kf.ByPID = name, name != ""
			} else {
				kf.Phase = running
			}
			if fatal(kf) {
				exp.NoteFault(kf.Phase, pushtext.FaultReason(kf), at)
			}
			out = append(out, kf)
		}
		if len(out) > 0 {
			wd.Faults(out)
		}
	}
}

// fatal reports whether a fault can end the phase it hit: a GPU fault
// whose action is more than "ignore" when its process is the phase's, a GPU
// lost or needing a reset or reboot, a disk that can no longer be written.
func fatal(f watchdog.KernelFault) bool {
	if f.Phase == "" {
		return false
	}
	if f.Kind == kmsg.Storage {
		switch f.Storage {
		case kmsg.ReadOnly, kmsg.Shutdown, kmsg.NVMeDown:
			return true
		}
		return false
	}
	action, _ := kmsg.ActionOf(f.Fault)
	switch {
	case f.ByPID:
		return action != kmsg.Ignore
	case f.FallenOff():
		return true
	}
	return action == kmsg.ResetGPU || action == kmsg.RestartBM
}

// runningPhase is the active phase that started last.
func runningPhase(exp *exporter.Exporter) (string, bool) {
	_, phases := exp.Snapshot()
	name, ok := "", false
	var started time.Time
	for _, p := range phases {
		if p.Active() && (!ok || p.Started.After(started)) {
			name, started, ok = p.Name, p.Started, true
		}
	}
	return name, ok
}
