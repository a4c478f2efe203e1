package phaseserver

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// noProcFS is a procfs that names no boot id or pid namespace: the
// server judges no phase's process.
const noProcFS = "testdata/no-procfs"

// goldenCompare checks c against testdata/golden/name.prom (see
// testkit.CompareGolden); -update rewrites it from fresh().
func goldenCompare(t *testing.T, c prometheus.Collector, fresh func() prometheus.Collector, name string) {
	t.Helper()
	testkit.CompareGolden(t, c, fresh, filepath.Join("testdata", "golden", name+".prom"), *update)
}
