//go:build linux

package diskguard

import (
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Statfs reads the filesystem that path leads to: stat(2) for its device
// id (following symlinks, as statfs does) and statfs(2) for its space and
// inodes. Space is what an unprivileged writer may use: f_bavail × f_frsize.
// It may block for as long as the filesystem does (a hung NFS server): the
// Guard calls it off its own goroutine, with a deadline.
//
// The calls run on a thread that blocks every signal. A call into a dead
// NFS or FUSE mount waits in the kernel, deaf to all signals but SIGKILL,
// and the kernel hands a signal sent to the process to one thread, the
// main one first: were that the waiting thread, the SIGTERM of a stop
// would stay pending until some other thread happened to look (40 s,
// 2 min, or never). A thread that blocks signals is never chosen.
func Statfs(path string) (Stat, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^all.Val[i]
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, &old); err != nil {
		return Stat{}, &PathError{Op: "statfs", Path: path, Err: fmt.Errorf("block signals: %w", err)}
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) //nolint:errcheck // restoring the mask it just read
	return statfs(path)
}

func statfs(path string) (Stat, error) {
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
