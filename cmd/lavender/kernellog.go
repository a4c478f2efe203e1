package main

// kernelLogFlags point the kernel log reader at /dev/kmsg, or for tests at
// a FIFO or file of its records.
type kernelLogFlags struct {
	KmsgPath string `name:"path.kmsg" default:"${kmsg_path}" help:"Kernel log to read OOM victims, GPU Xid errors and storage faults from, where readable (root or CAP_SYSLOG); a FIFO or file of /dev/kmsg records also works. Empty: none."`
}
