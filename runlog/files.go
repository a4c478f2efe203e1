package runlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// ErrNotRegular is the error for a path in the logs dir that is not a
// regular file: a FIFO would block a reader for ever and /dev/zero would
// never end, so neither is ever read.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is the error of ReadRegularFile for a file over its limit.
var ErrTooLarge = errors.New("file too large")

// ErrUnreadable marks a saved file (a state file, a phase table) that is
// there but cannot be read, or damaged and cannot be moved aside: it may
// hold the only record, so whoever saves it must never replace it.
var ErrUnreadable = errors.New("cannot be read")

// kind names a file type for an error message.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	default:
		return m.Type().String()
	}
}

// checkRegular stats path without opening it or following a symlink: a
// device behind a symlink is never opened (opening some, such as a
// watchdog, has effects of its own), and a run log or state file linked to
// another file is never read, appended to or salvaged into a copy others
// may read (a file of the logs dir replaced by a link to a private one).
func checkRegular(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%w (a %s)", ErrNotRegular, kind(st.Mode()))
	}
	return nil
}

// openRegular opens path with flag after checking it is a regular file.
// O_NONBLOCK keeps a file swapped for a FIFO between the check and the open
// from blocking the open; the check is then repeated on the open file.
func openRegular(path string, flag int) (*os.File, fs.FileInfo, error) {
	if err := checkRegular(path); err != nil {
		return nil, nil, err
	}
	fh, err := os.OpenFile(path, flag|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		fh.Close()
		return nil, nil, fmt.Errorf("%w (a %s)", ErrNotRegular, kind(st.Mode()))
	}
	return fh, st, nil
}

// ReadRegularFile reads path if it is a regular file of at most limit
// bytes, without ever blocking on a FIFO or reading past limit. The error
// wraps ErrNotRegular, ErrTooLarge or the file system's error. The exporter
// reads its phase table with it.
func ReadRegularFile(path string, limit int64) ([]byte, error) {
	fh, _, err := openRegular(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)
	}
	return data, nil
}

// maxAsideCopies bounds the numbering of damaged copies of one file.
const maxAsideCopies = 1000

// MoveAside renames a damaged file to path.damaged, or .damaged-2, -3, …
// if that name is taken: a damaged copy is someone's record and is never
// overwritten. It returns the new path. A hard link is tried first because
// it cannot replace an existing name even if another process races us; a
// file system without hard links (or a directory) falls back to a rename
// after checking the name is free.
func MoveAside(path string) (string, error) {
	for n := 1; n <= maxAsideCopies; n++ {
		aside := path + ".damaged"
		if n > 1 {
			aside += "-" + strconv.Itoa(n)
		}
		err := os.Link(path, aside)
		if err == nil {
			if err := os.Remove(path); err != nil {
				os.Remove(aside)
				return "", fmt.Errorf("runlog: move %s aside: %w", path, err)
			}
			return aside, nil
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if _, serr := os.Lstat(aside); serr == nil {
			continue
		}
		if err := os.Rename(path, aside); err != nil {
			return "", fmt.Errorf("runlog: move %s aside: %w", path, err)
		}
		return aside, nil
	}
	return "", fmt.Errorf("runlog: move %s aside: %d damaged copies already", path, maxAsideCopies)
}

// ReadSavedFile reads a file lavender saved in the logs dir (at most
// maxBytes) and hands its bytes to decode; what begins its errors, such as
// "delivery: read state". found is false, with no error, when there is no
// file. A file that is no regular file, too large, or that decode refuses
// is damaged: it is moved aside (MoveAside) and the error says where. One
// that cannot be read, or a damaged one that cannot be moved aside, wraps
// ErrUnreadable.
func ReadSavedFile(path string, maxBytes int64, what string, decode func([]byte) error) (found bool, err error) {
	data, err := ReadRegularFile(path, maxBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case errors.Is(err, ErrNotRegular), errors.Is(err, ErrTooLarge):
		return false, moveSavedFileAside(path, what, err)
	case err != nil:
		return false, fmt.Errorf("%s %s: %w: %w", what, path, ErrUnreadable, err)
	}
	if err := decode(data); err != nil {
		return false, moveSavedFileAside(path, what, err)
	}
	return true, nil
}

// moveSavedFileAside keeps a damaged saved file under a numbered name; one
// that cannot be moved counts as unreadable, so that no save replaces it.
func moveSavedFileAside(path, what string, damage error) error {
	aside, err := MoveAside(path)
	if err != nil {
		return fmt.Errorf("%s %s: damaged: %w; %w: %w", what, path, damage, ErrUnreadable, err)
	}
	return fmt.Errorf("%s %s: damaged: %w (moved to %s)", what, path, damage, filepath.Base(aside))
}
