package python_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// torchPython is the interpreter with PyTorch: $LAVENDER_TORCH_PYTHON, else
// Debian's /usr/bin/python3, for which python3-torch installs (the python3
// first on PATH may be another one, without torch).
func torchPython(t *testing.T) string {
	t.Helper()
	python := os.Getenv("LAVENDER_TORCH_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		testkit.Unavailable(t, "%s cannot import torch (%v): install the Debian package python3-torch", python, err)
	}
	return python
}

// oneThreadTorch keeps each test interpreter's torch to one thread: the
// tests' models are tiny, and the tests run several interpreters at once,
// whose OpenMP pools would otherwise each take every CPU and spin against
// each other (a third more CPU time on 2 cores, for nothing).
var oneThreadTorch = []string{"OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1"}

// TestTorch runs python/tests/torch_checks.py with real PyTorch: a plain
// loop whose loss is a tensor with a graph, a NaN tensor loss, and two
// ranks over gloo started with torchrun's env:// variables, where only rank
// 0 runs the phase and a failing rank 1 ends it failed with its rank in the
// reason.
func TestTorch(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(torchPython(t), "-m", "unittest", "-v", "tests.torch_checks")
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), oneThreadTorch...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("torch checks: %v\n%s", err, out)
	}
	t.Logf("%s", lastLine(string(out)))
}
