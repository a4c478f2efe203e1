package exporter

import (
	"context"

	"lavender/kmsg"
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
// faults and then handing it to then. The log is readable meanwhile; once
// it fails it is not, the reader's counts still exported and the error
// returned (and kept for Status).
func (k *KernelLog) Read(ctx context.Context, r *kmsg.Reader, then func([]kmsg.Fault)) error {
	k.SetReadable(true, r.Stats)
	err := r.Run(ctx, func(faults []kmsg.Fault) {
		k.Observe(faults)
		then(faults)
	})
	if err != nil {
		k.mu.Lock()
		k.readable, k.why = false, err.Error()
		k.mu.Unlock()
	}
	return err
}
