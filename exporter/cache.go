package exporter

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// NewReplayingGatherer replays g's last gathering to scrapes that come
// within ttl of it. It is for what is expensive and describes the
// exporter itself, not the host: client_golang's process collector reads
// /proc/self/net/netstat, snmp and all of /proc/stat on every scrape, and
// its Go collector allocates 20 KiB per scrape in debug.ReadGCStats and
// runtime/metrics, for figures no one reads at sub-second resolution.
// Replaying whole metric families rather than a collector's metrics also
// spares a registry's per-metric work (writing each metric out and
// checking it), which for these 45 series was a third of a scrape.
// Prometheus scraping every 15s never sees a replayed answer.
//
// The families returned are shared by every scrape in the ttl: callers
// must not change them, which promhttp's handler does not.
func NewReplayingGatherer(g prometheus.Gatherer, ttl time.Duration) prometheus.Gatherer {
	return &replayingGatherer{g: g, ttl: ttl, now: time.Now}
}

type replayingGatherer struct {
	g   prometheus.Gatherer
	ttl time.Duration
	now func() time.Time

	mu       sync.Mutex
	gathered bool
	at       time.Time
	families []*dto.MetricFamily // immutable once gathered
	err      error
}

func (r *replayingGatherer) Gather() ([]*dto.MetricFamily, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); !r.gathered || now.Sub(r.at) >= r.ttl {
		r.families, r.err = r.g.Gather()
		r.gathered, r.at = true, now
	}
	return r.families, r.err
}

// MergeGatherers gathers a and b, which must export no metric family of
// the same name, into one list sorted by name, as a registry returns it.
// Unlike prometheus.Gatherers it does not check every metric again: each
// list is a registry's, already checked when it was gathered. A family
// both export is served once, a's, and is an error, as a collision inside
// one registry is.
func MergeGatherers(a, b prometheus.Gatherer) prometheus.Gatherer {
	return mergedGatherer{a, b}
}

type mergedGatherer struct{ a, b prometheus.Gatherer }

func (m mergedGatherer) Gather() ([]*dto.MetricFamily, error) {
	as, aErr := m.a.Gather()
	bs, bErr := m.b.Gather()
	var errs prometheus.MultiError
	errs.Append(aErr)
	errs.Append(bErr)
	merged := make([]*dto.MetricFamily, 0, len(as)+len(bs))
	for len(as) > 0 || len(bs) > 0 {
		switch {
		case len(bs) == 0 || len(as) > 0 && as[0].GetName() < bs[0].GetName():
			merged, as = append(merged, as[0]), as[1:]
		case len(as) == 0 || bs[0].GetName() < as[0].GetName():
			merged, bs = append(merged, bs[0]), bs[1:]
		default:
			errs.Append(fmt.Errorf("metric family %q is exported twice; the second is left out", bs[0].GetName()))
			merged, as, bs = append(merged, as[0]), as[1:], bs[1:]
		}
	}
	return merged, errs.MaybeUnwrap()
}
