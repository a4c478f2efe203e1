// Package python holds lavender's Python client (lavender-client, import
// name lavender). Its Go tests run the client's own unit tests with
// python3 and check that it installs offline, so `go test ./...` covers
// the Python code too.
package python_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
//
// Each test class runs in its own interpreter, all at once: most of their
// time is spent waiting on child processes and hung exporters, not on CPU.
func TestUnittests(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("tests", "test_*.py"))
	if err != nil {
		t.Fatal(err)
	}
	var modules []string
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".py"); !strings.HasPrefix(name, "test_real_") {
			modules = append(modules, "tests."+name)
		}
	}
	python := python3(t)
	var runs []unittestRun
	for _, class := range unittestClasses(t, python, modules) {
		runs = append(runs, unittestRun{name: strings.TrimPrefix(class, "tests."), python: python, args: []string{class}})
	}
	runConcurrently(t, runs)
}

// unittestClasses lists the test classes (module.Class) that unittest's
// own loader finds in modules, so that a class is never left out the way a
// list kept by hand could leave it; it fails on a module that does not
// import, as running it would.
func unittestClasses(t *testing.T, python string, modules []string) []string {
	t.Helper()
	const list = `import sys, unittest
def cases(suite):
    for x in suite:
        if isinstance(x, unittest.TestSuite):
            yield from cases(x)
        else:
            yield x
seen = []
for case in cases(unittest.defaultTestLoader.loadTestsFromNames(sys.argv[1:])):
    if type(case).__name__ == "_FailedTest":
        case.debug()
    name = type(case).__module__ + "." + type(case).__qualname__
    if name not in seen:
        seen.append(name)
print("\n".join(seen))
`
	cmd := exec.Command(python, append([]string{"-c", list}, modules...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("listing the test classes of %v: %v\n%s", modules, err, stderr)
	}
	classes := strings.Fields(string(out))
	if len(classes) < len(modules) {
		t.Fatalf("unittest found %d test classes in %d modules: %q", len(classes), len(modules), out)
	}
	return classes
}

// TestPipInstallOffline installs the package the way the docs say, with no
// package index at all, and imports it from where pip put it.
func TestPipInstallOffline(t *testing.T) {
	t.Parallel()
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

// unittestRun is one `python -m unittest ARGS...` for runConcurrently.
type unittestRun struct {
	name   string // the subtest's
	python string
	args   []string
	env    []string // added to the environment
}

// runConcurrently starts every run at once, then reports each as a subtest
// of t, in order. go test -parallel (the number of CPUs by default) would
// run only two of them at a time on a 2-core machine, where most of their
// time is spent waiting on processes and sockets, not on the CPU.
func runConcurrently(t *testing.T, runs []unittestRun) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		out []byte
		err error
	}
	results := make([]chan result, len(runs))
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // no interpreter outlives the test
	for i, r := range runs {
		results[i] = make(chan result, 1)
		cmd := exec.CommandContext(ctx, r.python, append([]string{"-m", "unittest"}, r.args...)...)
		cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), r.env...)
		wg.Go(func() {
			out, err := cmd.CombinedOutput()
			results[i] <- result{out, err}
		})
	}
	for i, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			res := <-results[i]
			if res.err != nil {
				t.Fatalf("python -m unittest %s: %v\n%s", strings.Join(r.args, " "), res.err, res.out)
			}
			if strings.Contains(string(res.out), "skipped") {
				t.Logf("%s", res.out)
			}
			t.Logf("%s", lastLine(string(res.out)))
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
