package procfile

import (
	"runtime"
	"sync"
	"syscall"
)

// procSuperMagic is statfs(2)'s f_type of a procfs mount.
const procSuperMagic = 0x9fa0

// File reads one path again and again, as Read does, for a reader that
// reads the same file at every scrape.
//
// A file on a real procfs mount is opened once and then read from its
// start with pread(2) at every Read: the kernel renders it anew for each
// read from offset 0, so the figures are as fresh as a new open's, and
// the open, fstat and close that Read pays every time (three system calls
// of five, a third of a small procfs read's cost) are paid once. A procfs
// file cannot be renamed, replaced or turned into a FIFO, so the
// descriptor keeps naming the file that was checked. A file anywhere else
// (a fake procfs, a container's copy, a FUSE mount) can be swapped at any
// time, so it is opened, checked and closed at every Read, exactly as by
// Read. A failed read closes a held descriptor; the next Read opens the
// path again.
//
// A File is safe for concurrent use; reads of a held descriptor take
// turns.
type File struct {
	path string

	mu   sync.Mutex
	held *heldFD // nil until a procfs descriptor is held
}

// heldFD is the descriptor a File keeps, apart from the File so that a
// cleanup can close it once the File is unreachable.
type heldFD struct{ fd int }

// NewFile returns a File for path; nothing is opened until Read.
func NewFile(path string) *File { return &File{path: path} }

// Path is the path the File reads.
func (f *File) Path() string { return f.path }

// Read reads the file whole into *buf, growing it up to limit bytes, with
// Read's checks and errors.
func (f *File) Read(buf *[]byte, limit int) ([]byte, error) {
	if buf == nil {
		buf = new([]byte)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held == nil {
		fd, err := open(f.path)
		if err != nil {
			return nil, err
		}
		if !onProcfs(fd) {
			defer syscall.Close(fd)
			return readFD(fd, f.path, buf, limit, false)
		}
		f.held = &heldFD{fd: fd}
		runtime.AddCleanup(f, func(h *heldFD) { syscall.Close(h.fd) }, f.held)
	}
	data, err := readFD(f.held.fd, f.path, buf, limit, true)
	if err != nil {
		syscall.Close(f.held.fd)
		f.held.fd = -1 // the cleanup's close then fails harmlessly
		f.held = nil
	}
	return data, err
}

// onProcfs reports whether fd is a file of a procfs mount.
func onProcfs(fd int) bool {
	var st syscall.Statfs_t
	for {
		err := syscall.Fstatfs(fd, &st)
		if err == syscall.EINTR {
			continue
		}
		return err == nil && st.Type == procSuperMagic
	}
}
