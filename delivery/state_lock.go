package delivery

import (
	"errors"

	"github.com/lavender-ml/lavender/internal/statelock"
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
	fh, err := statelock.Take(st.path + ".lock")
	switch {
	case errors.Is(err, statelock.ErrHeld):
		b.logger.Error("[bark] ANOTHER LAVENDER KEEPS ITS BARK STATE IN THIS LOGS DIR: this one keeps none, so its held alerts and dedup memory do not survive a crash; give each serve or bridge its own --runlog.dir",
			"file", st.path)
		st.path = ""
	case err != nil:
		b.logger.Warn("[bark] cannot lock the Bark state; keeping it unlocked", "err", err)
	default:
		st.lock = fh
	}
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
