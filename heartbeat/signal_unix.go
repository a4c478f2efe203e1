//go:build unix

package heartbeat

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName is the signal's name, "SIGKILL", or "" for no signal this
// platform has.
func signalName(n int) string { return unix.SignalName(syscall.Signal(n)) }
