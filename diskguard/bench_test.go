package diskguard

import (
	"testing"
)

// BenchmarkPoll is one poll of three real paths on two filesystems (the
// temp dir and /, /dev/shm where present): a goroutine, a stat and a
// statfs per path, the dedup and the learning. The watchdog never waits
// for it; this is its cost in CPU.
func BenchmarkPoll(b *testing.B) {
	g, err := New(Config{Paths: []string{b.TempDir(), "/", "/dev/shm"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		g.Poll(b.Context())
	}
}
