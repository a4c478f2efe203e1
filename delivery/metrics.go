package delivery

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// What became of a push (Push.Action): the label values of
// lavender_webhook_alerts_total's action.
const (
	ActionPushed    = "pushed"    // a target accepted it
	ActionFailed    = "failed"    // due, but no target accepted it
	ActionDuplicate = "duplicate" // every target had accepted it already
	ActionHeld      = "held"      // storm control held it for the next summary push
)

type metrics struct {
	pushes       *prometheus.CounterVec // target (file:line), result (ok|failed)
	retries      *prometheus.CounterVec // target
	pushDuration prometheus.Histogram
	targets      prometheus.Gauge
	reloadOK     prometheus.Gauge
	reloadTime   prometheus.Gauge
}

// newMetrics makes the bridge's metrics and registers them, and the extra
// collectors, with reg (nil: none).
func newMetrics(reg prometheus.Registerer, extra ...prometheus.Collector) (*metrics, error) {
	m := &metrics{
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lavender_bark_pushes_total",
			Help: "Bark pushes by target (file:line of its *.bark.env line) and result (ok or failed).",
		}, []string{"target", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lavender_bark_push_retries_total",
			Help: "Tries of a push after a failure that may pass (5xx, 429, timeout, reset), by target; lavender_bark_pushes_total counts each push once, by its last try.",
		}, []string{"target"}),
		pushDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lavender_bark_push_duration_seconds",
			Help:    "Time from sending a Bark push to its answer or failure, per try.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		targets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lavender_bark_targets",
			Help: "Bark targets loaded from *.bark.env files.",
		}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lavender_bark_config_last_reload_successful",
			Help: "Whether the last load of the Bark targets succeeded.",
		}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lavender_bark_config_last_reload_success_timestamp_seconds",
			Help: "Time of the last successful load of the Bark targets.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range append([]prometheus.Collector{m.pushes, m.retries, m.pushDuration, m.targets, m.reloadOK, m.reloadTime}, extra...) {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// trackTargets starts every target's counters at zero, so rate() and
// increase() work from the first scrape, and drops the series of targets a
// reload removed, so the label set stays that of the config.
func (m *metrics) trackTargets(old, ts []string) {
	m.targets.Set(float64(len(ts)))
	keep := make(map[string]bool, len(ts))
	for _, t := range ts {
		keep[t] = true
	}
	for _, t := range old {
		if !keep[t] {
			m.pushes.DeletePartialMatch(prometheus.Labels{"target": t})
			m.retries.DeleteLabelValues(t)
		}
	}
	for _, t := range ts {
		m.pushes.WithLabelValues(t, "ok")
		m.pushes.WithLabelValues(t, "failed")
		m.retries.WithLabelValues(t)
	}
}
