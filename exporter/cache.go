package exporter

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NewCachingCollector replays c's last collection to scrapes that come
// within ttl of it. It is for collectors that are expensive and describe
// the exporter itself, not the host: client_golang's process collector
// reads /proc/self/net/netstat, snmp and all of /proc/stat on every scrape
// (a quarter of a lavender scrape's cost), and its Go collector allocates
// 20 KiB per scrape in debug.ReadGCStats and runtime/metrics, for figures
// no one reads at sub-second resolution. Prometheus scraping every 15s
// never sees a cached answer.
func NewCachingCollector(c prometheus.Collector, ttl time.Duration) prometheus.Collector {
	return &cachingCollector{c: c, ttl: ttl, now: time.Now}
}

type cachingCollector struct {
	c   prometheus.Collector
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	at      time.Time
	metrics []prometheus.Metric // immutable once collected
}

func (cc *cachingCollector) Describe(ch chan<- *prometheus.Desc) { cc.c.Describe(ch) }

func (cc *cachingCollector) Collect(ch chan<- prometheus.Metric) {
	cc.mu.Lock()
	if now := cc.now(); cc.metrics == nil || now.Sub(cc.at) >= cc.ttl {
		fresh := make(chan prometheus.Metric, 64)
		go func() {
			cc.c.Collect(fresh)
			close(fresh)
		}()
		metrics := cc.metrics[:0:0]
		for m := range fresh {
			metrics = append(metrics, m)
		}
		cc.metrics, cc.at = metrics, now
	}
	metrics := cc.metrics
	cc.mu.Unlock()
	for _, m := range metrics {
		ch <- m
	}
}
