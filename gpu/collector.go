package gpu

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Source gives one pass over the GPUs; *Reader is one, and tests feed
// snapshots of their own.
type Source interface {
	Snapshot() Snapshot
}

// Collector exports a Source's snapshot as const metrics, read at scrape
// time like the exporter's collectors. A reading the GPU does not support
// has no series, so a dashboard shows a gap, not a zero.
type Collector struct {
	src    Source
	reason string // "" when telemetry is on
}

// NewCollector builds the collector on src. openErr is what Open
// returned: when it is not nil, src is not read and the collector exports
// only lavender_gpu_telemetry_enabled 0 with the reason (Reason), so a
// host without GPUs or a cgo-less build says why it has no GPU metrics.
func NewCollector(src Source, openErr error) *Collector {
	if openErr == nil && src == nil {
		openErr = ErrClosed
	}
	return &Collector{src: src, reason: Reason(openErr)}
}

var (
	deviceLabels = []string{"gpu", "uuid", "pci_bus_id"}

	descEnabled = prometheus.NewDesc("lavender_gpu_telemetry_enabled",
		"1 when GPU telemetry reads NVML; 0 with the reason (no_cgo, no_driver, no_gpu, disabled, nvml_error, closed) when it does not.",
		[]string{"reason"}, nil)
	descScrapeDuration = prometheus.NewDesc("lavender_gpu_scrape_duration_seconds",
		"How long the NVML pass over all GPUs that this scrape reports took (passes are shared for up to the cache TTL).",
		nil, nil)
	descScrapeSuccess = prometheus.NewDesc("lavender_gpu_scrape_success",
		"1 when the NVML pass read every supported reading of every GPU that is not lost, 0 when a call failed or the pass is stuck.",
		nil, nil)
	descScrapeStuck = prometheus.NewDesc("lavender_gpu_scrape_stuck",
		"1 while an NVML pass has run past its deadline without returning (a GPU or the driver stuck): the GPUs' readings are absent, their info and lost series are the last complete pass's, and the duration is how long the pass has run.",
		nil, nil)
	descInfo = prometheus.NewDesc("lavender_gpu_info",
		"A GPU NVML sees, with its name; always 1.",
		append(deviceLabels, "name"), nil)
	descLost = prometheus.NewDesc("lavender_gpu_lost",
		"1 when NVML answers ERROR_GPU_IS_LOST for the GPU (fallen off the bus); its other readings are then absent.",
		deviceLabels, nil)
	descUtil = prometheus.NewDesc("lavender_gpu_utilization_ratio",
		"Fraction of NVML's last sample period (1/6 s to 1 s) in which one or more kernels ran on the GPU.",
		deviceLabels, nil)
	descMemUtil = prometheus.NewDesc("lavender_gpu_memory_utilization_ratio",
		"Fraction of NVML's last sample period in which device memory was read or written.",
		deviceLabels, nil)
	descMemUsed = prometheus.NewDesc("lavender_gpu_memory_used_bytes",
		"Device memory allocated, not counting what the driver reserves.",
		deviceLabels, nil)
	descMemTotal = prometheus.NewDesc("lavender_gpu_memory_total_bytes",
		"Device memory in total.",
		deviceLabels, nil)
	descPower = prometheus.NewDesc("lavender_gpu_power_watts",
		"Power the GPU draws (a 1-s average on Ampere, except GA100, and newer).",
		deviceLabels, nil)
	descPowerLimit = prometheus.NewDesc("lavender_gpu_power_limit_watts",
		"The power limit the GPU enforces.",
		deviceLabels, nil)
	descTemp = prometheus.NewDesc("lavender_gpu_temperature_celsius",
		"The GPU die's temperature.",
		deviceLabels, nil)
	descReason = prometheus.NewDesc("lavender_gpu_clock_event_reason_active",
		"1 while the reason holds the GPU's clocks below their maximum (NVML's clock event reasons), else 0.",
		append(deviceLabels, "reason"), nil)
	descECCVolatile = prometheus.NewDesc("lavender_gpu_ecc_uncorrected_volatile_errors_total",
		"Uncorrected ECC errors since the driver loaded.",
		deviceLabels, nil)
	descECCAggregate = prometheus.NewDesc("lavender_gpu_ecc_uncorrected_aggregate_errors_total",
		"Uncorrected ECC errors over the GPU's life.",
		deviceLabels, nil)
	descRemapped = prometheus.NewDesc("lavender_gpu_remapped_rows_total",
		"Memory rows the GPU remapped, by the kind of error that caused it (correctable, uncorrectable).",
		append(deviceLabels, "cause"), nil)
	descRemapPending = prometheus.NewDesc("lavender_gpu_remapped_rows_pending",
		"1 when a row remap waits for the next GPU reset.",
		deviceLabels, nil)
	descRemapFailed = prometheus.NewDesc("lavender_gpu_remapped_rows_failed",
		"1 when a row remap failed: the GPU should be replaced.",
		deviceLabels, nil)
	descProcesses = prometheus.NewDesc("lavender_gpu_processes",
		"Processes running on the GPU (compute and graphics).",
		deviceLabels, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descEnabled, descScrapeDuration, descScrapeSuccess, descScrapeStuck,
		descInfo, descLost, descUtil, descMemUtil, descMemUsed, descMemTotal, descPower,
		descPowerLimit, descTemp, descReason, descECCVolatile, descECCAggregate,
		descRemapped, descRemapPending, descRemapFailed, descProcesses} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.reason != "" {
		ch <- prometheus.MustNewConstMetric(descEnabled, prometheus.GaugeValue, 0, c.reason)
		return
	}
	s := c.src.Snapshot()
	stuck := errors.Is(s.Err, ErrStuck)
	if s.Err != nil && !stuck {
		ch <- prometheus.MustNewConstMetric(descEnabled, prometheus.GaugeValue, 0, Reason(s.Err))
		return
	}
	ch <- prometheus.MustNewConstMetric(descEnabled, prometheus.GaugeValue, 1, "")
	ch <- prometheus.MustNewConstMetric(descScrapeDuration, prometheus.GaugeValue, s.Duration.Seconds())
	ch <- prometheus.MustNewConstMetric(descScrapeStuck, prometheus.GaugeValue, b2f(stuck))
	if stuck {
		// Readings from before the stall would read as the GPUs' state
		// now and could start or hold an alert on it; the GPUs and
		// whether they were lost are held, so GPULost neither resolves
		// nor fires for a stall.
		ch <- prometheus.MustNewConstMetric(descScrapeSuccess, prometheus.GaugeValue, 0)
		for _, d := range s.Devices {
			l := []string{strconv.Itoa(d.Index), d.UUID, d.BusID}
			ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, append(l, d.Name)...)
			ch <- prometheus.MustNewConstMetric(descLost, prometheus.GaugeValue, b2f(d.Lost), l...)
		}
		return
	}
	ok := 1.0
	for _, d := range s.Devices {
		if d.Err != nil {
			ok = 0
		}
		collectDevice(ch, d)
	}
	ch <- prometheus.MustNewConstMetric(descScrapeSuccess, prometheus.GaugeValue, ok)
}

func collectDevice(ch chan<- prometheus.Metric, d Device) {
	l := []string{strconv.Itoa(d.Index), d.UUID, d.BusID}
	gauge := func(desc *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, append(l[:3:3], extra...)...)
	}
	counter := func(desc *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, append(l[:3:3], extra...)...)
	}
	gauge(descInfo, 1, d.Name)
	gauge(descLost, b2f(d.Lost))
	if d.Has(FieldUtilization) {
		gauge(descUtil, float64(d.SMUtil)/100)
		gauge(descMemUtil, float64(d.MemUtil)/100)
	}
	if d.Has(FieldMemory) {
		gauge(descMemUsed, float64(d.MemUsed))
		gauge(descMemTotal, float64(d.MemTotal))
	}
	if d.Has(FieldPower) {
		gauge(descPower, d.PowerW)
	}
	if d.Has(FieldPowerLimit) {
		gauge(descPowerLimit, d.PowerLimitW)
	}
	if d.Has(FieldTemperature) {
		gauge(descTemp, float64(d.TempC))
	}
	if d.Has(FieldClockEvents) {
		for _, r := range ClockEventReasonNames {
			gauge(descReason, b2f(d.ClockEventReasons&r.Bit != 0), r.Name)
		}
	}
	if d.Has(FieldECC) {
		counter(descECCVolatile, float64(d.ECCVolatileUncorrected))
		counter(descECCAggregate, float64(d.ECCAggregateUncorrected))
	}
	if d.Has(FieldRemappedRows) {
		counter(descRemapped, float64(d.RemappedRows.Correctable), "correctable")
		counter(descRemapped, float64(d.RemappedRows.Uncorrectable), "uncorrectable")
		gauge(descRemapPending, b2f(d.RemappedRows.Pending))
		gauge(descRemapFailed, b2f(d.RemappedRows.Failed))
	}
	if d.Has(FieldProcesses) {
		gauge(descProcesses, float64(len(d.Pids)))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
