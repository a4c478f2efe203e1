package exporter

import (
	"context"
	"log/slog"

	"github.com/lavender-ml/lavender/kmsg"
)

// Unreadable records why the kernel log is not read ("kernel log: stat
// /dev/kmsg: permission denied", or that none was asked for), for Status.
func (k *KernelLog) Unreadable(why string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.readable, k.why = false, why
}

// Status says whether the kernel log is read and, if not, why.
func (k *KernelLog) Status() (readable bool, why string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.readable, k.why
}

// Read reads r until ctx ends or the log fails, counting each batch of
// faults and then handing it to then. The log is readable while r can read
// its path, and not while the path is gone, unreadable or refused (a file
// removed and not made anew, a device swapped in); the change is logged
// once to logger (nil: not logged), not at each look, and a path that
// flaps says so at most once a minute. Once the log fails it is not
// readable, the reader's counts still exported and the error returned
// (and kept for Status).
func (k *KernelLog) Read(ctx context.Context, r *kmsg.Reader, logger *slog.Logger, then func([]kmsg.Fault)) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	k.SetReadable(true, r.Stats)
	r.OnHealth(func(err error) { k.health(r.Path(), err, logger) })
	err := r.Run(ctx, func(faults []kmsg.Fault) {
		k.observe(faults)
		then(faults)
	})
	if err != nil {
		k.mu.Lock()
		k.readable, k.why = false, err.Error()
		k.mu.Unlock()
	}
	return err
}

// health takes what the reader says of its path: nil, read again; an
// error, why nothing is read. Called from the reader's goroutine alone.
func (k *KernelLog) health(path string, err error, logger *slog.Logger) {
	k.mu.Lock()
	k.readable, k.why = err == nil, ""
	if err != nil {
		k.why = err.Error()
	}
	k.mu.Unlock()
	switch {
	case err != nil && !k.down:
		k.down = true
		if logIt, heldBack := k.downLogs.Report(); logIt {
			k.saidDown = true
			logger.Warn("kernel log not readable: OOM victims go unnamed, GPU and storage faults unseen", "err", err, "held_back", heldBack)
		}
	case err == nil && k.down:
		k.down = false
		if k.saidDown {
			k.saidDown = false
			logger.Info("kernel log readable again", "path", path)
		}
	}
}
