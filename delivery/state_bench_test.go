package delivery

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSaveStateFullDedup is one save of the state file with the dedup
// memory at its default cap (10,000 entries) and 1,000 held alerts: the
// cost a held alert adds to its webhook's answer at worst.
func BenchmarkSaveStateFullDedup(b *testing.B) {
	f := newFixture(b, map[string]string{"phone.bark.env": "http://127.0.0.1:1/KEY/$0"}, func(c *Config) {
		c.StateFile = filepath.Join(b.TempDir(), StateFileName)
		c.MaxPerMinute = 1
	})
	now := time.Now()
	var saved []dedupSaved
	for i := range DefaultDedupMaxEntries {
		saved = append(saved, dedupSaved{Target: "0123456789abcdef", Fingerprint: fmt.Sprintf("%016x", i), StartsAt: now.UnixNano(), Status: "firing", Expires: now.Add(time.Hour)})
	}
	f.bridge.dedup.restore(saved, now)
	f.bridge.storm.trackTargets(stormKeys{}, unnamedKeys("phone.bark.env:1"))
	for i := range 1000 {
		f.bridge.storm.Allow("phone.bark.env:1", alerts(fmt.Sprintf("Alert%d", i%40)), now)
	}
	b.ReportAllocs()
	for b.Loop() {
		f.bridge.changed()
		f.bridge.saveState()
	}
	st, err := os.Stat(f.cfg.StateFile)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Size()), "file-bytes")
}
