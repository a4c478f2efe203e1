package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// MountTmpfs mounts a size-limited tmpfs on a new directory and returns
// it; options are mount's -o list, e.g. "size=64m,nr_inodes=100". It is
// unmounted (lazily, should a test leave a file open) when the test ends.
// It skips the test, saying why, where mounting is not allowed (not root,
// not Linux, no mount command, a container without CAP_SYS_ADMIN); with
// LAVENDER_E2E=1 (CI, which runs as root) it fails instead.
func MountTmpfs(t testing.TB, options string) string {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		Unavailable(t, format, args...)
	}
	if runtime.GOOS != "linux" {
		skip("a tmpfs mount needs Linux, not %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		skip("mounting a tmpfs needs root (uid %d)", os.Geteuid())
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput()
	if err != nil {
		skip("cannot mount a tmpfs here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		}
	})
	return dir
}

// WriteFileOfSize writes a file of n bytes (not sparse: tmpfs counts what
// is written) in chunks of up to 64 MiB: a save of tens of MiB is one
// write, as torch.save's buffered writer makes it, and no poll sees it
// half written for long.
func WriteFileOfSize(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	chunk := make([]byte, min(n, 64<<20))
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for left := n; left > 0; {
		w := min(left, int64(len(chunk)))
		if _, err := f.Write(chunk[:w]); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		left -= w
	}
	return f.Close()
}
