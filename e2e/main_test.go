// Package e2e holds no code, only the tests that need lavender as a
// process of its own: signals, kill -9, restarts, exit codes, memory
// under load or odd files. Each starts the real binary (built once, with
// -race when the tests run with it, or $LAVENDER_TEST_BINARY) and talks to
// it over loopback HTTP; the rest of a command's behaviour is tested in
// process, beside its code. The slow ones (a 60 s load, a real minute of
// storm control across a kill -9, slowloris) run with LAVENDER_SLOW=1.
package e2e

import (
	"os"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

func TestMain(m *testing.M) {
	// The tests wait on their processes far more than they use the CPU.
	testkit.WaitBoundParallel(8)
	code := m.Run()
	testkit.RemoveBinaries()
	os.Exit(code)
}
