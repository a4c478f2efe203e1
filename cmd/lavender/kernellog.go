package main

import (
	"context"
	"log/slog"

	"lavender/kmsg"
)

// kernelLogFlags point the kernel log reader at /dev/kmsg, or for tests at
// a FIFO or file of its records.
type kernelLogFlags struct {
	KmsgPath string `name:"path.kmsg" default:"${kmsg_path}" help:"Kernel log to read OOM victims, GPU Xid errors and storage faults from, where readable (root or CAP_SYSLOG); a FIFO or file of /dev/kmsg records also works. Empty: none."`
}

// kernelLog is the open kernel log, or why there is none.
type kernelLog struct {
	r   *kmsg.Reader // nil when not readable or not asked for
	err error        // why not readable; nil when asked for none
}

// openKernelLog opens the kernel log. Not readable (no root, no
// CAP_SYSLOG) is normal: lavender then works blind to kernel faults, says
// so once, and shows it in lavender_kernel_log_readable and on the status
// page.
func (f *kernelLogFlags) openKernelLog(logger *slog.Logger) *kernelLog {
	if f.KmsgPath == "" {
		return &kernelLog{}
	}
	r, err := kmsg.Open(f.KmsgPath)
	if err != nil {
		logger.Warn("kernel log not readable: OOM victims go unnamed, GPU and storage faults unseen", "err", err)
		return &kernelLog{err: err}
	}
	return &kernelLog{r: r}
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
func (k *kernelLog) run(ctx context.Context, logger *slog.Logger, handlers ...func([]kmsg.Fault)) {
	if k == nil || k.r == nil {
		return
	}
	err := k.r.Run(ctx, func(fs []kmsg.Fault) {
		for _, h := range handlers {
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
