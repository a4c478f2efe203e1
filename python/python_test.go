// Package python holds lavender's Python client (lavender-client, import
// name lavender). Its Go tests run the client's own unit tests with
// python3 and check that it installs offline, so `go test ./...` covers
// the Python code too.
package python_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// python3 finds an interpreter: $LAVENDER_PYTHON, else python3 on PATH.
func python3(t *testing.T) string {
	t.Helper()
	name := os.Getenv("LAVENDER_PYTHON")
	if name == "" {
		name = "python3"
	}
	return testkit.NeedTool(t, "python3", name)
}

// TestUnittests runs python/tests with python3 -m unittest: the client
// against recording, hung and garbage-speaking exporters, ranks, signals,
// and the framework stand-ins. The tests of the real frameworks
// (test_real_*.py) need torch: TestRealFrameworks runs them.
func TestUnittests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("tests", "test_*.py"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-m", "unittest"}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".py"); !strings.HasPrefix(name, "test_real_") {
			args = append(args, "tests."+name)
		}
	}
	cmd := exec.Command(python3(t), args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	t.Logf("%s", lastLine(string(out)))
}

// TestPipInstallOffline installs the package the way the docs say, with no
// package index at all, and imports it from where pip put it.
func TestPipInstallOffline(t *testing.T) {
	python := python3(t)
	if err := exec.Command(python, "-m", "pip", "--version").Run(); err != nil {
		testkit.Unavailable(t, "%s has no pip: install the Debian package python3-pip", python)
	}
	target := t.TempDir()
	src, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--disable-pip-version-check",
		"--target", target, src)
	// A source tree pip builds in place may not be writable by the test
	// user; the build backend writes only into pip's own directories.
	cmd.Env = append(os.Environ(), "PIP_NO_INPUT=1", "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip install --no-index ./python: %v\n%s", err, out)
	}
	check := exec.Command(python, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import lavender, lavender.hf, lavender.lightning;"+
		" print(lavender.__file__, lavender.__version__)", target)
	out, err := check.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), target) {
		t.Fatalf("import after install: %v\n%s", err, out)
	}
	// The wheel's version is the repository's, the one the binary reports.
	if got := strings.Fields(string(out)); len(got) != 2 || got[1] != lavender.Version() {
		t.Errorf("installed lavender.__version__: %q, want %s (VERSION)", out, lavender.Version())
	}
	dist, err := filepath.Glob(filepath.Join(target, "lavender_client-*.dist-info"))
	if err != nil || len(dist) != 1 || filepath.Base(dist[0]) != "lavender_client-"+lavender.Version()+".dist-info" {
		t.Errorf("installed metadata %v, want lavender_client-%s.dist-info", dist, lavender.Version())
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
