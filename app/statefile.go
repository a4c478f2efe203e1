package app

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/lavender-ml/lavender/internal/statelock"
	"github.com/lavender-ml/lavender/runlog"
)

// readStateFile reads the JSON state file at path into v, at most
// maxBytes, and has check judge what it holds (runlog.ReadSavedFile: a
// damaged file is moved aside, one that cannot be read wraps
// runlog.ErrUnreadable). It reports false and no error when there is no
// file.
func readStateFile(path string, maxBytes int64, v any, check func() error) (bool, error) {
	return runlog.ReadSavedFile(path, maxBytes, "read", func(data []byte) error {
		if err := json.Unmarshal(data, v); err != nil {
			return err
		}
		return check()
	})
}

// writeStateFile writes v as JSON at path atomically (temp file, fsync,
// rename, fsync of the dir), as the phase table and delivery's state are
// written: a kill -9 leaves the last state whole.
func writeStateFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = runlog.WriteFileAtomic(path, append(data, '\n'))
	}
	return err
}

// ServeStateLockName is the lock file in the logs dir that a serve holds
// for the state only serve writes there: WatchdogStateFileName and
// KernelLogPositionFileName. delivery's state has a lock of its own.
const ServeStateLockName = "serve-state.lock"

// lockServeState takes the logs dir's serve-state lock for as long as
// serve runs (release gives it back), and says whether this serve keeps
// its watchdog state and kernel log position. A second serve on the same
// logs dir keeps neither, and says so at ERROR: it would carry over the
// first one's incidents as its own and move its kernel log position back
// and forth, so that a restart of the first would read records twice or
// skip the faults between. A lock that cannot be taken for another reason
// (a logs dir that cannot be made) leaves the state unlocked, as before
// there was a lock: its saves report their own failures.
func lockServeState(dir string, logger *slog.Logger) (keep bool, release func()) {
	fh, err := statelock.Take(filepath.Join(dir, ServeStateLockName))
	switch {
	case errors.Is(err, statelock.ErrHeld):
		logger.Error("ANOTHER LAVENDER SERVE KEEPS ITS WATCHDOG STATE AND KERNEL LOG POSITION IN THIS LOGS DIR: this one keeps neither, so its open incidents do not survive a restart and it reads the kernel log from its end; give each serve its own --runlog.dir",
			"dir", dir)
		return false, func() {}
	case err != nil:
		logger.Warn("cannot lock the watchdog state and kernel log position; keeping them unlocked", "err", err)
		return true, func() {}
	}
	return true, func() { fh.Close() }
}
