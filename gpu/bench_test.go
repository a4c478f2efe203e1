//go:build cgo

package gpu

import "testing"

// BenchmarkSnapshot is one uncached pass over the eight GPUs of go-nvml's
// DGX H200 mock: lavender's own cost per pass (the calls, the checks,
// the Device values). On a real GPU the driver's calls dominate, the
// process lists most (milliseconds per call, by third-party
// measurements), which is why passes are shared within DefaultTTL. The
// mock records every call it answers, so allocations include its log.
func BenchmarkSnapshot(b *testing.B) {
	srv := testServer(8)
	r := openTest(b, srv, Options{TTL: -1})
	b.ReportAllocs()
	for b.Loop() {
		if s := r.Snapshot(); len(s.Devices) != 8 || s.Devices[7].Err != nil {
			b.Fatalf("pass: %+v", s)
		}
	}
}

// BenchmarkSnapshotCached is a call answered from the cache.
func BenchmarkSnapshotCached(b *testing.B) {
	r := openTest(b, testServer(8), Options{TTL: 1 << 62})
	r.Snapshot()
	b.ReportAllocs()
	for b.Loop() {
		r.Snapshot()
	}
}
