package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lavender-ml/lavender/runlog"
)

// errStateFileUnreadable marks a state file of serve's (the watchdog's
// open incidents, the kernel log's position) that is there but cannot be
// read, nor moved aside: it may hold the only record, so a caller that
// keeps records never replaces it.
var errStateFileUnreadable = errors.New("cannot be read")

// readStateFile reads the JSON state file at path into v, at most maxBytes,
// and has check judge what it holds. It reports false and no error when
// there is no file. A file that is no regular file, too large, not JSON or
// that check refuses is damaged: it is moved aside under a numbered name,
// and the error says where. One that cannot be read is
// errStateFileUnreadable.
func readStateFile(path string, maxBytes int64, v any, check func() error) (bool, error) {
	data, err := runlog.ReadRegularFile(path, maxBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case errors.Is(err, runlog.ErrNotRegular), errors.Is(err, runlog.ErrTooLarge):
		return false, moveStateFileAside(path, err)
	case err != nil:
		return false, fmt.Errorf("read %s: %w: %w", path, errStateFileUnreadable, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, moveStateFileAside(path, err)
	}
	if err := check(); err != nil {
		return false, moveStateFileAside(path, err)
	}
	return true, nil
}

// moveStateFileAside keeps a damaged file under a numbered name; one that
// cannot be moved counts as unreadable, so that no save replaces it.
func moveStateFileAside(path string, damage error) error {
	aside, err := runlog.MoveAside(path)
	if err != nil {
		return fmt.Errorf("read %s: damaged: %w; %w: %w", path, damage, errStateFileUnreadable, err)
	}
	return fmt.Errorf("read %s: damaged: %w (moved to %s)", path, damage, filepath.Base(aside))
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
