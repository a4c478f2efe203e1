package exporter

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkReadSwapActivity measures the vmstat half of a swap scrape.
func BenchmarkReadSwapActivity(b *testing.B) {
	for _, procfs := range []string{"testdata/procfs/swap54", "/proc"} {
		b.Run(strings.ReplaceAll(procfs, "/", "_"), func(b *testing.B) {
			if _, err := readSwapActivity(procfs); err != nil {
				b.Skip(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := readSwapActivity(procfs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSwapCollector measures one Collect of the swap collector on the
// real /proc: both file reads and the eight constant metrics.
func BenchmarkSwapCollector(b *testing.B) {
	c := newSwapCollector("/proc", os.Getpagesize(), slog.New(slog.DiscardHandler))
	ch := make(chan prometheus.Metric, 16)
	b.ReportAllocs()
	for b.Loop() {
		c.Collect(ch)
		if len(ch) < 10 {
			b.Fatalf("%d metrics, want 10", len(ch))
		}
		for len(ch) > 0 {
			<-ch
		}
	}
}

// BenchmarkProcFileRead is the floor under the swap readers: reading the
// two procfs files and nothing else, so the parsing overhead on top of the
// kernel's cost of generating them shows.
func BenchmarkProcFileRead(b *testing.B) {
	for _, name := range []string{"/proc/meminfo", "/proc/vmstat"} {
		b.Run(strings.ReplaceAll(name, "/", "_"), func(b *testing.B) {
			buf := make([]byte, 16<<10)
			b.ReportAllocs()
			for b.Loop() {
				f, err := os.Open(name)
				if err != nil {
					b.Skip(err)
				}
				n, err := f.Read(buf)
				f.Close()
				if err != nil || n == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
