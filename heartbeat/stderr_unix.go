//go:build unix

package heartbeat

import (
	"os"

	"golang.org/x/sys/unix"
)

// readNow reads what r holds now without waiting: n > 0 bytes, or 0 with
// ended telling end of file (for a pseudo-terminal's master, EIO: no
// process holds the terminal any more) from nothing to read yet. A read of
// a pseudo-terminal's master first takes in what its other end has
// written, so nothing written before the command exited is missed.
func readNow(r *os.File, p []byte) (n int, ended bool) {
	rc, err := r.SyscallConn()
	if err != nil {
		return 0, false
	}
	_ = rc.Control(func(fd uintptr) {
		if flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK == 0 {
			return // a read could wait
		}
		for {
			var rerr error
			n, rerr = unix.Read(int(fd), p)
			switch {
			case rerr == unix.EINTR:
				continue
			case rerr == unix.EIO || (rerr == nil && n == 0):
				n, ended = 0, true
			case rerr != nil:
				n = 0
			}
			return
		}
	})
	return n, ended
}
