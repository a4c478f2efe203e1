package app

import (
	"encoding/json"
	"os"
	"path/filepath"

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
