package proctree

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkScan is the cost of one Scan, which serve makes every poll while
// a phase with a pid runs (to place OOM victims that end before the kill is
// read): a fake procfs of n processes, and this machine's /proc.
func BenchmarkScan(b *testing.B) {
	for _, n := range []int{100, 1000} {
		root := b.TempDir()
		for pid := 1; pid <= n; pid++ {
			dir := filepath.Join(root, fmt.Sprint(pid))
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			stat := fmt.Sprintf("%d (python3) S %d %d 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 %d 100 10\n", pid, max(pid/8, 1), pid, 1000+pid)
			if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("fake-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if t, err := Scan(root); err != nil || len(t) != n {
					b.Fatalf("%d processes, %v", len(t), err)
				}
			}
		})
	}
	b.Run("proc", func(b *testing.B) {
		b.ReportAllocs()
		var procs int
		for b.Loop() {
			t, err := Scan("")
			if err != nil {
				b.Fatal(err)
			}
			procs = len(t)
		}
		b.ReportMetric(float64(procs), "processes")
	})
}
