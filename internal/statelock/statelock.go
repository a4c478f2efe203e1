// Package statelock keeps a second lavender off a state file that the
// first one writes: an exclusive flock(2) on a lock file beside it, held
// for as long as the process keeps the state.
package statelock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrHeld is Take's error when another process holds the lock.
var ErrHeld = errors.New("another process holds the lock")

// Take takes the lock file at path, making its directory and the file if
// need be, and holds it until the returned file is closed (or the process
// ends, a crash included: the kernel drops a flock with its holder). It
// never waits: a lock another process holds is ErrHeld at once.
//
// The file is opened read-only, so a logs dir can still be remounted
// read-only; without following a symlink; and without blocking, so a FIFO
// put in its place cannot hold up a start. Anything but a regular file is
// refused.
func Take(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	if info, err := fh.Stat(); err != nil || !info.Mode().IsRegular() {
		fh.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	for {
		err = syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		fh.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrHeld)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return fh, nil
}
