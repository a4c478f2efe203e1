package phaseserver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/phaseapi"
)

var (
	phaseLabels = []string{"phase"}

	phaseActiveDesc = prometheus.NewDesc("lavender_phase_active",
		"1 while the training phase runs, 0 once it has ended.", phaseLabels, nil)
	phaseStartDesc = prometheus.NewDesc("lavender_phase_start_timestamp_seconds",
		"When the phase started, in seconds since the epoch.", phaseLabels, nil)
	phaseLastHeartbeatDesc = prometheus.NewDesc("lavender_phase_last_heartbeat_timestamp_seconds",
		"When the phase last sent a heartbeat (start, ping or end), in seconds since the epoch.", phaseLabels, nil)
	phaseEndDesc = prometheus.NewDesc("lavender_phase_end_timestamp_seconds",
		"When the phase ended, in seconds since the epoch; absent while it runs.", phaseLabels, nil)
	phaseDurationDesc = prometheus.NewDesc("lavender_phase_duration_seconds",
		"Time the phase has run so far, or its final duration once ended.", phaseLabels, nil)
	phaseHeartbeatsDesc = prometheus.NewDesc("lavender_phase_heartbeats_total",
		"Heartbeats (start, pings, end) received for the phase since it last started.", phaseLabels, nil)
	phaseFailedDesc = prometheus.NewDesc("lavender_phase_failed",
		"1 if the phase ended as failed, 0 if it ended ok; absent while it runs and when how it ended is unknown (its process ended while no lavender watched, and no end came).", phaseLabels, nil)
	phaseFailureDesc = prometheus.NewDesc("lavender_phase_failure_info",
		"1 for a phase whose latest failed end in this run gave a reason (kept when the phase starts again), the reason (cleaned, at most 200 characters) in its label, so that an alert can say why; absent otherwise.", []string{"phase", "reason"}, nil)
	phaseFailuresDesc = prometheus.NewDesc("lavender_phase_failures_total",
		"Failed ends of the phase in this run (status failed, or its process found dead); a new start of the phase keeps the count, so a failure started again before the next scrape still shows.", phaseLabels, nil)
	phaseLastFailureDurationDesc = prometheus.NewDesc("lavender_phase_last_failure_duration_seconds",
		"How long the phase's latest failed run in this run ran, start to end; kept when the phase starts again; absent until it fails.", phaseLabels, nil)
	phaseStepDesc = prometheus.NewDesc("lavender_phase_step",
		"The last step the phase reported; absent until it reports one.", phaseLabels, nil)
	phaseTotalStepsDesc = prometheus.NewDesc("lavender_phase_total_steps",
		"The number of steps the phase reported it has in all; absent until it reports one.", phaseLabels, nil)
	phaseLastProgressDesc = prometheus.NewDesc("lavender_phase_last_progress_timestamp_seconds",
		"When the phase's step last moved (or was first reported), in seconds since the epoch; absent until it reports a step.", phaseLabels, nil)
	phaseETADesc = prometheus.NewDesc("lavender_phase_eta_seconds",
		"Estimated seconds until the running phase reaches its total steps, from a step rate smoothed with a 5-minute half-life; absent until the total is known and two heartbeats have advanced the step.", phaseLabels, nil)
	phaseLastEvalProgressDesc = prometheus.NewDesc("lavender_phase_last_eval_progress_timestamp_seconds",
		"When the phase's evaluation progress (eval_step) last changed, in seconds since the epoch; absent until it reports one.", phaseLabels, nil)
	phaseLastBusyDesc = prometheus.NewDesc("lavender_phase_last_busy_timestamp_seconds",
		"When the phase's client last saw its training thread at work between steps (a busy ping: an evaluation, a checkpoint save), in seconds since the epoch; absent until it reports one.", phaseLabels, nil)
	phaseLossDesc = prometheus.NewDesc("lavender_phase_loss",
		"The latest training loss the phase reported, NaN or ±Inf as such (a diverged run); absent until it reports one.", phaseLabels, nil)
	runStartDesc = prometheus.NewDesc("lavender_run_start_timestamp_seconds",
		"When the current run started, in seconds since the epoch; the run label is its log's base name.", []string{"run"}, nil)
)

// Describe sends the descriptors of the phase metrics, of
// lavender_proc_hides_processes and of lavender_heartbeats_refused_total.
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	(*phaseCollector)(s).Describe(ch)
	(*procVisibilityCollector)(s).Describe(ch)
	s.refusedTotal.Describe(ch)
}

// Collect sends the phase table as it stands, whether procfs hides the
// phases' processes, and the refused heartbeats.
func (s *Server) Collect(ch chan<- prometheus.Metric) {
	(*phaseCollector)(s).Collect(ch)
	(*procVisibilityCollector)(s).Collect(ch)
	s.refusedTotal.Collect(ch)
}

// phaseCollector publishes the phase table, built fresh at each scrape.
type phaseCollector Server

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{phaseActiveDesc, phaseStartDesc, phaseLastHeartbeatDesc, phaseEndDesc,
		phaseDurationDesc, phaseHeartbeatsDesc, phaseFailedDesc, phaseFailureDesc, phaseFailuresDesc, phaseLastFailureDurationDesc, phaseStepDesc, phaseTotalStepsDesc,
		phaseLastProgressDesc, phaseETADesc, phaseLastEvalProgressDesc, phaseLastBusyDesc, phaseLossDesc, runStartDesc} {
		ch <- d
	}
}

func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	run, phases := (*Server)(c).Snapshot()
	now := c.clock()
	if run != nil && !run.Started.IsZero() {
		ch <- prometheus.MustNewConstMetric(runStartDesc, prometheus.GaugeValue, unixSeconds(run.Started), run.File)
	}
	for _, p := range phases {
		active, failed := 0.0, 0.0
		if p.Active() {
			active = 1
		}
		if p.Status == phaseapi.StatusFailed {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(phaseActiveDesc, prometheus.GaugeValue, active, p.Name)
		ch <- prometheus.MustNewConstMetric(phaseStartDesc, prometheus.GaugeValue, unixSeconds(p.Started), p.Name)
		ch <- prometheus.MustNewConstMetric(phaseLastHeartbeatDesc, prometheus.GaugeValue, unixSeconds(p.LastHeartbeat), p.Name)
		ch <- prometheus.MustNewConstMetric(phaseDurationDesc, prometheus.GaugeValue, p.DurationSeconds, p.Name)
		ch <- prometheus.MustNewConstMetric(phaseHeartbeatsDesc, prometheus.CounterValue, float64(p.Heartbeats), p.Name)
		if p.Step != nil {
			ch <- prometheus.MustNewConstMetric(phaseStepDesc, prometheus.GaugeValue, float64(*p.Step), p.Name)
			ch <- prometheus.MustNewConstMetric(phaseLastProgressDesc, prometheus.GaugeValue, unixSeconds(p.ProgressAt), p.Name)
		}
		if p.Total > 0 {
			ch <- prometheus.MustNewConstMetric(phaseTotalStepsDesc, prometheus.GaugeValue, float64(p.Total), p.Name)
		}
		if p.EvalStep != nil && !p.EvalProgressAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(phaseLastEvalProgressDesc, prometheus.GaugeValue, unixSeconds(p.EvalProgressAt), p.Name)
		}
		if p.Busy != "" && !p.BusyAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(phaseLastBusyDesc, prometheus.GaugeValue, unixSeconds(p.BusyAt), p.Name)
		}
		if p.Loss != nil {
			ch <- prometheus.MustNewConstMetric(phaseLossDesc, prometheus.GaugeValue, float64(*p.Loss), p.Name)
		}
		if eta, ok := phaseETA(p, now); ok {
			ch <- prometheus.MustNewConstMetric(phaseETADesc, prometheus.GaugeValue, eta.Seconds(), p.Name)
		}
		ch <- prometheus.MustNewConstMetric(phaseFailuresDesc, prometheus.CounterValue, float64(p.Failures), p.Name)
		if f := p.LastFailure; f != nil {
			ch <- prometheus.MustNewConstMetric(phaseLastFailureDurationDesc, prometheus.GaugeValue, max(f.Ended.Sub(f.Started), 0).Seconds(), p.Name)
		}
		if !p.Active() {
			ch <- prometheus.MustNewConstMetric(phaseEndDesc, prometheus.GaugeValue, unixSeconds(p.Ended), p.Name)
			if p.Status != phaseapi.StatusUnknown {
				ch <- prometheus.MustNewConstMetric(phaseFailedDesc, prometheus.GaugeValue, failed, p.Name)
			}
		}
		// The reason of the failure the row shows, or else of its latest
		// failure, which a new start keeps: PhaseFailed quotes it.
		switch {
		case p.Status == phaseapi.StatusFailed:
			if p.Reason != "" {
				ch <- prometheus.MustNewConstMetric(phaseFailureDesc, prometheus.GaugeValue, 1, p.Name, p.Reason)
			}
		case p.LastFailure != nil && p.LastFailure.Reason != "":
			ch <- prometheus.MustNewConstMetric(phaseFailureDesc, prometheus.GaugeValue, 1, p.Name, p.LastFailure.Reason)
		}
	}
}

func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}
