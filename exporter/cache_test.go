package exporter

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countingCollector emits one gauge whose value counts its collections.
type countingCollector struct{ n float64 }

var countingDesc = prometheus.NewDesc("test_collections", "Collections so far.", nil, nil)

func (c *countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- countingDesc }
func (c *countingCollector) Collect(ch chan<- prometheus.Metric) {
	c.n++
	ch <- prometheus.MustNewConstMetric(countingDesc, prometheus.GaugeValue, c.n)
}

func TestCachingCollector(t *testing.T) {
	inner := &countingCollector{}
	cc := NewCachingCollector(inner, time.Second).(*cachingCollector)
	now := time.Unix(1000, 0)
	cc.now = func() time.Time { return now }

	for _, step := range []struct {
		after time.Duration
		want  float64
	}{
		{0, 1},                      // first scrape collects
		{500 * time.Millisecond, 1}, // within the TTL: replayed
		{499 * time.Millisecond, 1}, // still within
		{1 * time.Millisecond, 2},   // a full TTL since the collection: fresh
		{10 * time.Second, 3},       // long after: fresh
	} {
		now = now.Add(step.after)
		if got := testutil.ToFloat64(cc); got != step.want {
			t.Fatalf("after %s: value %v, want %v", step.after, got, step.want)
		}
	}
}
