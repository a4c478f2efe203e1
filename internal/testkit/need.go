package testkit

import (
	"os"
	"os/exec"
	"testing"
)

// Unavailable ends a test that cannot run here because something it needs
// is missing (a program, a package, root): it skips, saying why, or fails
// with LAVENDER_E2E=1, which CI sets after installing all of it, so that a
// missing install step cannot pass as a skip.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("LAVENDER_E2E") == "1" {
		t.Fatalf(format+" (LAVENDER_E2E=1 requires it)", args...)
	}
	t.Skipf(format+" (LAVENDER_E2E=1 makes this a failure)", args...)
}

// NeedTool returns the path of the first of names found on PATH; with
// none, the test is Unavailable, naming the Debian package pkg that
// installs it.
func NeedTool(t testing.TB, pkg string, names ...string) string {
	t.Helper()
	for _, name := range names {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	Unavailable(t, "%s not found: install the Debian package %s", names[0], pkg)
	return ""
}
