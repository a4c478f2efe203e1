package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// MountStalledFuse mounts a FUSE filesystem whose server never answers,
// as a dead network or FUSE mount behaves, and returns its directory.
// Every call into it (stat, statfs) waits in the kernel, deaf to every
// signal but SIGKILL, until the test ends: then the connection is aborted,
// which fails the waiting calls, and the mount is detached. No FUSE
// library is needed: the kernel is handed /dev/fuse, and nobody reads it,
// so even its INIT request is never answered. It is Unavailable where
// mounting is not allowed (not root, not Linux, no /dev/fuse).
func MountStalledFuse(t testing.TB) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		Unavailable(t, "a FUSE mount needs Linux, not %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		Unavailable(t, "mounting FUSE needs root (uid %d)", os.Geteuid())
	}
	dev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0) // close-on-exec: no child holds the connection open
	if err != nil {
		Unavailable(t, "cannot open /dev/fuse: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "stalled")
	if err := os.Mkdir(dir, 0o755); err != nil {
		dev.Close()
		t.Fatal(err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", dev.Fd())
	if err := syscall.Mount("lavender-stalled", dir, "fuse", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		dev.Close()
		Unavailable(t, "cannot mount FUSE here: %v", err)
	}
	t.Cleanup(func() {
		// Closing the only descriptor aborts the connection: the calls
		// still waiting fail with ENOTCONN and their threads go free.
		if err := dev.Close(); err != nil {
			t.Errorf("close /dev/fuse: %v", err)
		}
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
