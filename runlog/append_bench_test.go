package runlog

import (
	"strings"
	"testing"
)

// BenchmarkAppendCurrent measures the path long-lived writers such as the
// bridge take for every line: find the newest run in the directory, then
// append (with compaction at the default cap).
func BenchmarkAppendCurrent(b *testing.B) {
	opts := Options{Dir: b.TempDir()}
	if _, err := Start(opts, "device=cuda lavender=v0.1.0", RunStart); err != nil {
		b.Fatal(err)
	}
	msg := "BARK swap 54% sent ok=1 fail=0 " + strings.Repeat("x", 40)
	b.ReportAllocs()
	for b.Loop() {
		if err := AppendCurrent(opts, msg); err != nil {
			b.Fatal(err)
		}
	}
}
