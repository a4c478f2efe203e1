package main

import (
	"fmt"

	"github.com/lavender-ml/lavender/kmsg"
)

// kernelLogFlags point the kernel log reader at /dev/kmsg, or for tests at
// a FIFO or file of its records.
type kernelLogFlags struct {
	KmsgPath string `name:"path.kmsg" default:"${kmsg_path}" help:"Kernel log to read OOM victims, GPU Xid errors and storage faults from, where readable (root or CAP_SYSLOG); a FIFO or file of /dev/kmsg records also works. Empty: none."`
}

// checkKmsgPath refuses, before anything starts, a --path.kmsg that can
// never be the kernel log (/dev/zero would be read for ever, a directory
// never): a mistake in the flag, unlike a log lavender may not read.
func (f *kernelLogFlags) checkKmsgPath() error {
	if f.KmsgPath == "" {
		return nil
	}
	if err := kmsg.Check(f.KmsgPath); err != nil {
		return fmt.Errorf("--path.kmsg: %w", err)
	}
	return nil
}
