package testkit

import (
	"bytes"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

// CompareGolden checks the text exposition of c against the golden file at
// path. With update (the package's -update flag) it first rewrites the file
// from a scrape of fresh(), a collector in the same state as c: c itself
// must see its first scrape in the comparison, as counters move.
func CompareGolden(t testing.TB, c prometheus.Collector, fresh func() prometheus.Collector, path string, update bool) {
	t.Helper()
	if update {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(fresh())
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if err := testutil.CollectAndCompare(c, bytes.NewReader(want)); err != nil {
		t.Error(err)
	}
}
