package delivery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockState takes the lock beside the state file (its name plus ".lock")
// for as long as the bridge lives, so that a second lavender on the same
// logs dir cannot replace this one's held alerts with its own. If another
// process holds it, this bridge keeps no state, and says so at ERROR. A
// lock that cannot be taken for any other reason (the logs dir missing or
// not writable) does not stop the state: its saves report their own
// failures.
func (b *Pipeline) lockState() {
	st := &b.state
	path := st.path + ".lock"
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	var fh *os.File
	if err == nil {
		// Read-only, so the logs dir can still be remounted read-only;
		// O_NONBLOCK, so a FIFO put in its place cannot block the start.
		fh, err = os.OpenFile(path, os.O_RDONLY|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0o644)
	}
	if err == nil {
		if info, serr := fh.Stat(); serr != nil || !info.Mode().IsRegular() {
			fh.Close()
			err = fmt.Errorf("%s is not a regular file", path)
		}
	}
	if err != nil {
		b.logger.Warn("[bark] cannot lock the Bark state; keeping it unlocked", "err", err)
		return
	}
	if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fh.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b.logger.Error("[bark] ANOTHER LAVENDER KEEPS ITS BARK STATE IN THIS LOGS DIR: this one keeps none, so its held alerts and dedup memory do not survive a crash; give each serve or bridge its own --runlog.dir",
				"file", st.path)
			st.path = ""
			return
		}
		b.logger.Warn("[bark] cannot lock the Bark state; keeping it unlocked", "err", err)
		return
	}
	st.lock = fh
}

// Close releases the state file's lock and drops a save put off or to be
// tried again; the serving commands call it once Flush has saved the state
// (Flush tries once more, however recently a try failed). The bridge must
// not be used afterwards.
func (b *Pipeline) Close() {
	st := &b.state
	st.timerMu.Lock()
	st.closed = true
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	st.timerMu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.stopped = true
	if st.lock != nil {
		st.lock.Close()
		st.lock = nil
	}
}
