//go:build linux

package diskguard

import (
	"fmt"
	"syscall"
)

// Statfs reads the filesystem that path leads to: stat(2) for its device
// id (following symlinks, as statfs does) and statfs(2) for its space and
// inodes. Space is what an unprivileged writer may use: f_bavail × f_frsize.
// It may block for as long as the filesystem does (a hung NFS server): the
// Guard calls it off its own goroutine, with a deadline.
func Statfs(path string) (Stat, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return Stat{}, &PathError{Op: "stat", Path: path, Err: err}
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(path, &fs); err != nil {
		return Stat{}, &PathError{Op: "statfs", Path: path, Err: err}
	}
	frsize := uint64(fs.Frsize)
	if frsize == 0 {
		frsize = uint64(fs.Bsize) // kernels before 2.6 left f_frsize 0
	}
	if frsize == 0 {
		return Stat{}, &PathError{Op: "statfs", Path: path, Err: fmt.Errorf("block size 0")}
	}
	return Stat{
		Dev:       uint64(st.Dev), // uint32 on some architectures
		Size:      fs.Blocks * frsize,
		Free:      fs.Bfree * frsize,
		Avail:     fs.Bavail * frsize,
		Files:     fs.Files,
		FilesFree: fs.Ffree,
	}, nil
}
