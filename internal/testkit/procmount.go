package testkit

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// NobodyID is the uid and gid of the user nobody on Linux.
const NobodyID = 65534

// MountProc mounts a fresh procfs with options (mount's -o list, e.g.
// "hidepid=invisible") on a new directory that every user may enter, and
// returns it: what /proc is inside a unit with systemd's ProtectProc=.
// It is unmounted and removed when the test ends. It skips the test,
// saying why, where mounting is not allowed; with LAVENDER_E2E=1 it fails
// instead.
func MountProc(t testing.TB, options string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		Unavailable(t, "a procfs mount needs Linux, not %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		Unavailable(t, "mounting a procfs needs root (uid %d)", os.Geteuid())
	}
	dir := worldDir(t, "lavender-proc-")
	out, err := exec.Command("mount", "-t", "proc", "-o", options, "proc", dir).CombinedOutput()
	if err != nil {
		Unavailable(t, "cannot mount a procfs with %s here: %v: %s", options, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		}
	})
	return dir
}

// worldDir makes a directory other users may enter and read (a test's
// TempDir is its owner's alone), removed when the test ends.
func worldDir(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// RunTestAs runs the test named name of this test binary as the user and
// group id, with env added to the environment, and returns what it printed.
// The binary is copied where that user can run it. The test named is a
// helper that does its work only when it finds env set; it is how a test
// sees what another, unprivileged user sees. It skips like MountProc where
// it cannot change user.
func RunTestAs(t testing.TB, id uint32, name string, env ...string) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "running a test as another user needs root (uid %d)", os.Geteuid())
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(worldDir(t, "lavender-testbin-"), filepath.Base(self))
	if err := copyExecutable(self, bin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(bin) })
	cmd := exec.Command(bin, "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id, Gid: id}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func copyExecutable(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
