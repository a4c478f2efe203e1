// Package procfile reads the small files of procfs and sysfs so that no
// file put in their place can hang or swell the reader: a FIFO, a device
// (a symlink to /dev/zero), a directory or a file past a size limit is an
// error, returned at once.
//
// The file is opened with O_NONBLOCK, so opening a FIFO does not wait for a
// writer, and its type is checked on the opened descriptor (fstat), so a
// file swapped in after a check is still caught. Procfs and sysfs files
// are regular files to stat (size 0 or 4096, whatever they hold), and a
// read of a regular file never waits for a writer; the read loop is bounded
// by the limit, so the time a read takes is bounded by the file's size.
package procfile

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// MaxBytes is the limit callers use unless they know better: the largest
// procfs file lavender reads (vmstat) is under 8 KiB, /proc/stat on a
// large host a few hundred KiB.
const MaxBytes = 1 << 20

// ErrTooLarge is the error of a file past the limit.
var ErrTooLarge = errors.New("file too large")

// ErrNotRegular is the error of a file that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Read reads path whole into *buf, growing it up to limit bytes, and
// returns the bytes read (a slice of *buf). A file of more than limit
// bytes is an error wrapping ErrTooLarge; one that is not a regular file
// is an error wrapping ErrNotRegular that says what it is. Errors are
// *fs.PathError, so errors.Is(err, fs.ErrNotExist) and the errno still
// work. buf may be nil.
func Read(path string, buf *[]byte, limit int) ([]byte, error) {
	if buf == nil {
		buf = new([]byte)
	}
	fd, err := open(path)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	return readFD(fd, path, buf, limit, false)
}

// readFD reads fd to its end as Read does; with pread it reads from
// offset 0 with pread(2), leaving the descriptor's offset alone, which on
// procfs makes the kernel render the file anew.
func readFD(fd int, path string, buf *[]byte, limit int, pread bool) ([]byte, error) {
	if cap(*buf) == 0 {
		*buf = make([]byte, min(limit+1, 32<<10))
	}
	*buf = (*buf)[:cap(*buf)]
	n := 0
	for {
		if n == len(*buf) {
			if n > limit {
				return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)}
			}
			*buf = append(*buf, make([]byte, min(len(*buf), limit+1-n))...)
			*buf = (*buf)[:cap(*buf)]
		}
		var m int
		var err error
		if pread {
			m, err = syscall.Pread(fd, (*buf)[n:], int64(n))
		} else {
			m, err = syscall.Read(fd, (*buf)[n:])
		}
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		case m == 0:
			if n > limit {
				return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)}
			}
			return (*buf)[:n], nil
		}
		n += m
	}
}

// ReadString is Read into a fresh buffer, as a string.
func ReadString(path string, limit int) (string, error) {
	data, err := Read(path, nil, limit)
	return string(data), err
}

// open opens path read-only without waiting and makes sure it is a regular
// file; it returns the descriptor.
func open(path string) (int, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return -1, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return -1, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(uint32(st.Mode)))}
	}
	return fd, nil
}

// kind names a file type as ls -l would describe it.
func kind(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		return "a FIFO"
	case syscall.S_IFCHR:
		return "a character device"
	case syscall.S_IFBLK:
		return "a block device"
	case syscall.S_IFDIR:
		return "a directory"
	case syscall.S_IFSOCK:
		return "a socket"
	}
	return fmt.Sprintf("file type %#o", mode&syscall.S_IFMT)
}
