package exporter

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/internal/throttle"
	"github.com/lavender-ml/lavender/kmsg"
)

// Label bounds of the kernel fault metrics: a host has a handful of GPUs
// and disks, and a garbled or hostile log must not grow a series per
// record. Past a bound, new values are counted under "other"; values seen
// before keep their own series.
const (
	maxGPULabels     = 16 // distinct gpu values
	maxXidLabels     = 32 // distinct xid values
	maxDeviceLabels  = 32 // distinct storage device values
	otherLabel       = "other"
	kernelLogMetrics = "lavender_kernel_log_"
)

// deviceName is what a storage device label may hold: a kernel device name
// ("nvme1n1p1", "sda", "dm-0", "md127").
var deviceName = lazyregexp.New(`^[A-Za-z0-9_.:-]{1,32}$`)

// KernelLog exports what the kernel log said: GPU Xid errors, GPUs fallen
// off the bus, storage errors, and whether the log can be read at all, so
// that silence from a log lavender cannot read never looks like health.
// Counters start at 0 for the process: faults from before the start are
// not counted (the reader starts at the log's end). It is safe for
// concurrent use.
type KernelLog struct {
	mu       sync.Mutex
	readable bool
	why      string            // why not readable, for the status page
	stats    func() kmsg.Stats // the reader's counts; nil without one
	xid      map[[2]string]float64
	fallen   map[string]float64
	// lastFallen is each GPU label's last record of a fall off the bus, so
	// that the driver's second record of the same loss is not a second one.
	lastFallen map[string]kmsg.Fault
	storage    map[[2]string]float64
	gpus       labelSet
	xids       labelSet
	devices    labelSet

	// down and saidDown: the reader's path is not readable now, and
	// the log was told (downLogs lets one through a minute).
	down, saidDown bool
	downLogs       throttle.Reporter
}

// labelSet admits up to max distinct values, then maps the rest to other.
type labelSet struct {
	max  int
	seen map[string]bool
}

func (s *labelSet) admit(v string) string {
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	if s.seen[v] || len(s.seen) < s.max {
		s.seen[v] = true
		return v
	}
	return otherLabel
}

// NewKernelLog returns the collector, the log not (yet) readable.
func NewKernelLog() *KernelLog {
	return &KernelLog{
		xid:        map[[2]string]float64{},
		fallen:     map[string]float64{},
		lastFallen: map[string]kmsg.Fault{},
		storage:    map[[2]string]float64{},
		gpus:       labelSet{max: maxGPULabels},
		xids:       labelSet{max: maxXidLabels},
		devices:    labelSet{max: maxDeviceLabels},
	}
}

// SetReadable says whether the log is being read, and where the reader's
// counts come from (nil: none).
func (k *KernelLog) SetReadable(readable bool, stats func() kmsg.Stats) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.readable, k.stats = readable, stats
}

// observe counts a batch of faults.
func (k *KernelLog) observe(faults []kmsg.Fault) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, f := range faults {
		switch f.Kind {
		case kmsg.Xid:
			gpu := k.gpus.admit(f.GPU)
			k.xid[[2]string{gpu, k.xids.admit(strconv.Itoa(f.Xid))}]++
			if f.FallenOff() {
				k.countFallen(gpu, f)
			}
		case kmsg.FallenOffBus:
			k.countFallen(k.gpus.admit(f.GPU), f)
		case kmsg.Storage:
			dev := otherLabel
			if deviceName.MatchString(f.Device) {
				dev = k.devices.admit(f.Device)
			}
			k.storage[[2]string{dev, string(f.Storage)}]++
		}
	}
}

// countFallen counts a GPU lost off the bus, once however many forms the
// driver said it in (kmsg.Fault.Echoes).
func (k *KernelLog) countFallen(gpu string, f kmsg.Fault) {
	prev, seen := k.lastFallen[gpu]
	k.lastFallen[gpu] = f
	if seen && f.Echoes(prev) {
		return
	}
	k.fallen[gpu]++
}

var (
	xidDesc = prometheus.NewDesc("lavender_gpu_xid_errors_total",
		"NVIDIA Xid errors in the kernel log since lavender started, by GPU (PCI address as the driver prints it) and Xid number. At most 16 GPUs and 32 Xid numbers get their own series; the rest count as \"other\".",
		[]string{"gpu", "xid"}, nil)
	fallenDesc = prometheus.NewDesc("lavender_gpu_fallen_off_bus_total",
		"Times since lavender started that the kernel log said a GPU fell off the bus (Xid 79, or the driver's message without an Xid; the two forms of one loss within 5 s count once), by GPU.",
		[]string{"gpu"}, nil)
	storageDesc = prometheus.NewDesc("lavender_storage_errors_total",
		"Storage faults in the kernel log since lavender started, by device and kind (fs_error, read_only, shutdown, io_error, nvme_timeout, nvme_reset, nvme_down). At most 32 devices get their own series.",
		[]string{"device", "kind"}, nil)
	readableDesc = prometheus.NewDesc(kernelLogMetrics+"readable",
		"1 while lavender reads the kernel log; 0 when it cannot (no root or CAP_SYSLOG, no /dev/kmsg, --path.kmsg empty, its file gone or unreadable, or reading failed): GPU and storage faults are then unseen and OOM victims unnamed.",
		nil, nil)
	recordsDesc = prometheus.NewDesc(kernelLogMetrics+"records_total",
		"Kernel log records read since lavender started, of every facility.", nil, nil)
	ignoredDesc = prometheus.NewDesc(kernelLogMetrics+"ignored_records_total",
		"Kernel log records read that userspace wrote (facility other than the kernel's): never counted as faults.", nil, nil)
	lostDesc = prometheus.NewDesc(kernelLogMetrics+"overruns_total",
		"Times the kernel overwrote log records before lavender read them (a flood faster than the reader).", nil, nil)
)

// Describe sends the descriptors.
func (k *KernelLog) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{xidDesc, fallenDesc, storageDesc, readableDesc, recordsDesc, ignoredDesc, lostDesc} {
		ch <- d
	}
}

// Collect sends the counts.
func (k *KernelLog) Collect(ch chan<- prometheus.Metric) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(readableDesc, prometheus.GaugeValue, boolValue(k.readable))
	if k.stats != nil {
		st := k.stats()
		ch <- prometheus.MustNewConstMetric(recordsDesc, prometheus.CounterValue, float64(st.Records))
		ch <- prometheus.MustNewConstMetric(ignoredDesc, prometheus.CounterValue, float64(st.Ignored))
		ch <- prometheus.MustNewConstMetric(lostDesc, prometheus.CounterValue, float64(st.Lost))
	}
	for l, v := range k.xid {
		ch <- prometheus.MustNewConstMetric(xidDesc, prometheus.CounterValue, v, l[0], l[1])
	}
	for gpu, v := range k.fallen {
		ch <- prometheus.MustNewConstMetric(fallenDesc, prometheus.CounterValue, v, gpu)
	}
	for l, v := range k.storage {
		ch <- prometheus.MustNewConstMetric(storageDesc, prometheus.CounterValue, v, l[0], l[1])
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
