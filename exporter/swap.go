package exporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shirou/gopsutil/v4/common"
	"github.com/shirou/gopsutil/v4/mem"

	"github.com/lavender-ml/lavender/internal/procfile"
)

// Swap is one reading of <procfs>/meminfo, reduced to what the swap alerts
// and the watchdog need.
type Swap struct {
	TotalBytes  uint64
	UsedBytes   uint64
	FreeBytes   uint64
	CachedBytes uint64
	// UsedRatio is UsedBytes/TotalBytes on 0–1; 0 on a host without swap,
	// never NaN, so "ratio > 0.8" alerts need no "and total > 0" guard.
	UsedRatio float64
	// MemAvailableRatio is MemAvailable/MemTotal on 0–1.
	MemAvailableRatio float64
}

// ReadSwap reads swap and available-memory figures from <procfs>/meminfo
// (procfs "" means /proc) through gopsutil's mem.VirtualMemoryWithContext,
// with the proc root passed in ctx (common.EnvKey, HostProcEnvKey) as
// gopsutil's users beside a host's /proc do, so readers of different
// roots never share the process-wide HOST_PROC. It is cheap enough to
// call every few seconds.
//
// gopsutil opens the file with a plain open(2), which waits for ever on a
// FIFO put in its place, reads it with an unbounded line reader, takes the
// last of two lines with the same key and has panicked on malformed
// files. So it only reads a meminfo that has passed the checks first:
// procfile's read (opened without blocking, a regular file, at most
// procfile.MaxBytes) and parseMeminfo's (each used line once, in kB, in
// range). A panic inside gopsutil is an error, and figures no meminfo can
// hold (MemTotal 0, more available or free than there is, a percentage
// that is NaN or out of range) are refused, never clamped.
//
// A meminfo without MemAvailable (kernels before 3.14) is not given to
// gopsutil: it would then read <procfs>/zoneinfo the same blocking,
// unbounded way and index each line's first field, which panics on a
// blank line. The figures then come from parseMeminfo.
func ReadSwap(ctx context.Context, procfs string) (Swap, error) {
	return readSwap(ctx, procfs, mem.VirtualMemoryWithContext)
}

// virtualMemoryReader is gopsutil's mem.VirtualMemoryWithContext, or a
// stand-in in tests.
type virtualMemoryReader func(ctx context.Context) (*mem.VirtualMemoryStat, error)

func readSwap(ctx context.Context, procfs string, virtualMemory virtualMemoryReader) (Swap, error) {
	if procfs == "" {
		procfs = DefaultProcFS
	}
	return readSwapFrom(withProcRoot(ctx, procfs), filepath.Join(procfs, "meminfo"), readProcFile, virtualMemory)
}

// readSwapFrom is readSwap of the meminfo at path, read with read; ctx
// carries path's proc root for gopsutil (withProcRoot).
func readSwapFrom(ctx context.Context, path string, read procFileReader, virtualMemory virtualMemoryReader) (Swap, error) {
	buf := procBufs.Get().(*[]byte)
	data, err := read(path, buf)
	if err != nil {
		procBufs.Put(buf)
		return Swap{}, fmt.Errorf("exporter: read meminfo: %w", err)
	}
	m, err := parseMeminfo(data)
	procBufs.Put(buf)
	if err != nil {
		return Swap{}, fmt.Errorf("exporter: read %s: %w", path, err)
	}
	if !m.HaveMemAvailable {
		s, err := swapFromFigures(m.MemTotal, m.MemAvailable, m.SwapTotal, m.SwapFree, m.SwapCached)
		if err != nil {
			return Swap{}, fmt.Errorf("exporter: read %s: %w", path, err)
		}
		return s, nil
	}
	vm, err := readVirtualMemory(ctx, virtualMemory)
	if err != nil {
		return Swap{}, fmt.Errorf("exporter: read %s through gopsutil: %w", path, err)
	}
	// gopsutil's own derived figure: Used wraps below zero when Available
	// exceeds Total, and 0/0 is NaN. Written so that NaN fails.
	if !(vm.UsedPercent >= 0 && vm.UsedPercent <= 100) {
		return Swap{}, fmt.Errorf("exporter: read %s through gopsutil: used memory %v %% is not a percentage", path, vm.UsedPercent)
	}
	s, err := swapFromFigures(vm.Total, vm.Available, vm.SwapTotal, vm.SwapFree, vm.SwapCached)
	if err != nil {
		return Swap{}, fmt.Errorf("exporter: read %s through gopsutil: %w", path, err)
	}
	return s, nil
}

// withProcRoot returns ctx telling gopsutil that procfs is its proc root.
func withProcRoot(ctx context.Context, procfs string) context.Context {
	return context.WithValue(ctx, common.EnvKey, common.EnvMap{common.HostProcEnvKey: procfs})
}

// readVirtualMemory calls gopsutil with the proc root ctx carries
// (withProcRoot). A panic inside gopsutil is returned as an error, so a
// malformed file costs one reading, not the process.
func readVirtualMemory(ctx context.Context, virtualMemory virtualMemoryReader) (vm *mem.VirtualMemoryStat, err error) {
	defer func() {
		if p := recover(); p != nil {
			vm, err = nil, fmt.Errorf("gopsutil panicked: %v", p)
		}
	}()
	vm, err = virtualMemory(ctx)
	if err == nil && vm == nil {
		err = errors.New("gopsutil returned no reading")
	}
	return vm, err
}

// swapFromFigures checks meminfo's figures, in bytes, and derives the
// ratios. A figure no kernel writes (no memory at all, more available or
// free than there is) is an error: clamping it would hide a broken file
// behind a plausible ratio, and 0/0 would be NaN.
func swapFromFigures(memTotal, memAvailable, swapTotal, swapFree, swapCached uint64) (Swap, error) {
	if memTotal == 0 {
		return Swap{}, errors.New("MemTotal is 0")
	}
	if memAvailable > memTotal {
		return Swap{}, fmt.Errorf("MemAvailable %d kB exceeds MemTotal %d kB", memAvailable/1024, memTotal/1024)
	}
	if swapFree > swapTotal {
		return Swap{}, fmt.Errorf("SwapFree %d kB exceeds SwapTotal %d kB", swapFree/1024, swapTotal/1024)
	}
	s := Swap{
		TotalBytes:        swapTotal,
		FreeBytes:         swapFree,
		UsedBytes:         swapTotal - swapFree,
		CachedBytes:       swapCached,
		MemAvailableRatio: float64(memAvailable) / float64(memTotal),
	}
	if swapTotal > 0 {
		s.UsedRatio = float64(s.UsedBytes) / float64(swapTotal)
	}
	for _, r := range []float64{s.MemAvailableRatio, s.UsedRatio} {
		if !(r >= 0 && r <= 1) { // written so that NaN fails
			return Swap{}, fmt.Errorf("ratio %v is not on 0-1", r)
		}
	}
	return s, nil
}

// swapActivity holds the kernel's cumulative swap traffic since boot, and
// the OOM kills, which come from the same file.
type swapActivity struct {
	InPages, OutPages uint64 // pswpin, pswpout
	// OOMKills is oom_kill, the OOM killer's victims since boot.
	// HaveOOMKills is false on kernels before 4.13, which lack the line.
	OOMKills     uint64
	HaveOOMKills bool
}

// readSwapActivity reads pswpin, pswpout and oom_kill from <procfs>/vmstat.
// gopsutil's SwapMemoryWithContext would read the first two, but it also
// calls sysinfo(2), assumes 4 KiB pages and hides a missing file, so the
// lines are parsed here.
func readSwapActivity(procfs string) (swapActivity, error) {
	if procfs == "" {
		procfs = DefaultProcFS
	}
	return readSwapActivityFrom(filepath.Join(procfs, "vmstat"), readProcFile)
}

// readSwapActivityFrom is readSwapActivity of the vmstat at path, read
// with read.
func readSwapActivityFrom(path string, read procFileReader) (swapActivity, error) {
	buf := procBufs.Get().(*[]byte)
	defer procBufs.Put(buf)
	data, err := read(path, buf)
	if err != nil {
		return swapActivity{}, fmt.Errorf("exporter: read vmstat: %w", err)
	}
	var a swapActivity
	var haveIn, haveOut bool
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		key, value, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			continue
		}
		var dst *uint64
		switch string(key) { // no allocation: the compiler special-cases this
		case "pswpin":
			dst, haveIn = &a.InPages, true
		case "pswpout":
			dst, haveOut = &a.OutPages, true
		case "oom_kill":
			dst, a.HaveOOMKills = &a.OOMKills, true
		default:
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(value)), 10, 64)
		if err != nil {
			return swapActivity{}, fmt.Errorf("exporter: read %s: %s: %w", path, key, err)
		}
		*dst = n
	}
	if !haveIn || !haveOut {
		return swapActivity{}, fmt.Errorf("exporter: read %s: no pswpin/pswpout lines", path)
	}
	return a, nil
}

// procBufs hold one procfs file each. The kernel renders a procfs file anew
// for every read(2), so os.ReadFile's growing reads cost several renders of
// vmstat; one read into a buffer that fits the whole file costs one.
var procBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readProcFile reads path into *buf through procfile.Read: opened without
// blocking, refused unless it is a regular file (procfs files are; a FIFO
// or a symlink to /dev/zero is not), and at most procfile.MaxBytes, so no
// file put in its place can hang a scrape or the watchdog or grow the
// heap. The buffer grows only for a file larger than it (then the result
// is correct but not atomic, as with os.ReadFile).
func readProcFile(path string, buf *[]byte) ([]byte, error) {
	return procfile.Read(path, buf, procfile.MaxBytes)
}

// heldReader reads path as readProcFile does, through a procfile.File: on
// a real procfs the file stays open between reads (see procfile.File).
// The reader reads that path whatever path it is given.
func heldReader(path string) procFileReader {
	f := procfile.NewFile(path)
	return func(_ string, buf *[]byte) ([]byte, error) { return f.Read(buf, procfile.MaxBytes) }
}

// Sources of swap figures, the values of the "file" label on
// lavender_swap_read_errors_total.
const (
	sourceMeminfo  = "meminfo"
	sourceVmstat   = "vmstat"
	sourcePressure = pressureFile
)

var (
	swapTotalDesc = prometheus.NewDesc("lavender_swap_total_bytes",
		"Swap space in bytes (SwapTotal in meminfo).", nil, nil)
	swapUsedDesc = prometheus.NewDesc("lavender_swap_used_bytes",
		"Swap space in use in bytes (SwapTotal - SwapFree).", nil, nil)
	swapFreeDesc = prometheus.NewDesc("lavender_swap_free_bytes",
		"Unused swap space in bytes (SwapFree in meminfo).", nil, nil)
	swapCachedDesc = prometheus.NewDesc("lavender_swap_cached_bytes",
		"Memory that is also in swap, in bytes (SwapCached in meminfo).", nil, nil)
	swapUsedRatioDesc = prometheus.NewDesc("lavender_swap_used_ratio",
		"Fraction of swap space in use, 0-1; 0 on a host without swap.", nil, nil)
	memAvailableRatioDesc = prometheus.NewDesc("lavender_memory_available_ratio",
		"MemAvailable / MemTotal from meminfo, 0-1.", nil, nil)
	swapInDesc = prometheus.NewDesc("lavender_swap_in_bytes_total",
		"Bytes swapped in since boot (pswpin in vmstat times the page size).", nil, nil)
	swapOutDesc = prometheus.NewDesc("lavender_swap_out_bytes_total",
		"Bytes swapped out since boot (pswpout in vmstat times the page size).", nil, nil)
	// One Desc per file, the file a constant label: the label pair is
	// then made once here, not at every scrape as a variable label's is.
	meminfoReadErrorsDesc  = readErrorsDesc(sourceMeminfo)
	vmstatReadErrorsDesc   = readErrorsDesc(sourceVmstat)
	pressureReadErrorsDesc = readErrorsDesc(sourcePressure)
	// Named as node_exporter's pressure collector names them
	// (node_pressure_memory_*), with lavender's prefix.
	pressureWaitingDesc = prometheus.NewDesc("lavender_pressure_memory_waiting_seconds_total",
		"Total time in seconds that at least one task waited for memory (PSI some); absent on a kernel without PSI.", nil, nil)
	pressureStalledDesc = prometheus.NewDesc("lavender_pressure_memory_stalled_seconds_total",
		"Total time in seconds that all non-idle tasks stalled on memory at once (PSI full); absent on a kernel without PSI.", nil, nil)
	oomKillsDesc = prometheus.NewDesc("lavender_oom_kills_total",
		"Processes killed by the OOM killer since boot (oom_kill in vmstat); absent on kernels before 4.13.", nil, nil)
)

func readErrorsDesc(file string) *prometheus.Desc {
	return prometheus.NewDesc("lavender_swap_read_errors_total",
		"Failed reads of the swap, pressure and OOM figures, by procfs file.", nil, prometheus.Labels{"file": file})
}

// swapCollector reads meminfo, vmstat and pressure/memory at scrape time,
// each once, as node_exporter does. A failed read leaves that file's
// metrics out of the scrape, counts an error and logs one line; repeats of
// the same failure are logged at debug level so a broken procfs does not
// flood the log every scrape. A kernel without PSI is no failure: the
// pressure metrics are left out and one info line says why.
type swapCollector struct {
	procfs   string
	pageSize uint64
	logger   *slog.Logger
	// The three files' paths and readers, made once: each reader keeps
	// its file open on a real procfs (heldReader).
	meminfoPath, vmstatPath, pressurePath string
	readMeminfo, readVmstat               procFileReader
	read                                  procFileReader // of pressure/memory; heldReader but in tests
	// gopsutilCtx tells gopsutil the proc root (withProcRoot).
	gopsutilCtx context.Context
	// virtualMemory is gopsutil's meminfo reader but in tests.
	virtualMemory virtualMemoryReader

	meminfoErrors  atomic.Uint64
	vmstatErrors   atomic.Uint64
	pressureErrors atomic.Uint64

	noPSILogged atomic.Bool

	mu      sync.Mutex
	lastErr map[string]string // source -> last error text, "" when healthy
}

// NewSwapCollector reads procfs (mounted at procfs) at each scrape;
// vmstat's page counts are turned into bytes with pageSize (0: the
// host's). logger nil logs nothing.
func NewSwapCollector(procfs string, pageSize int, logger *slog.Logger) prometheus.Collector {
	return newSwapCollector(procfs, pageSize, logger)
}

func newSwapCollector(procfs string, pageSize int, logger *slog.Logger) *swapCollector {
	if procfs == "" {
		procfs = DefaultProcFS
	}
	if pageSize <= 0 {
		pageSize = os.Getpagesize()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &swapCollector{
		procfs:   procfs,
		pageSize: uint64(pageSize),
		logger:   logger,
		lastErr:  map[string]string{},

		meminfoPath:  filepath.Join(procfs, "meminfo"),
		vmstatPath:   filepath.Join(procfs, "vmstat"),
		pressurePath: filepath.Join(procfs, pressureFile),
		gopsutilCtx:  withProcRoot(context.Background(), procfs),

		virtualMemory: mem.VirtualMemoryWithContext,
	}
	c.readMeminfo, c.readVmstat, c.read = heldReader(c.meminfoPath), heldReader(c.vmstatPath), heldReader(c.pressurePath)
	return c
}

func (c *swapCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{swapTotalDesc, swapUsedDesc, swapFreeDesc, swapCachedDesc,
		swapUsedRatioDesc, memAvailableRatioDesc, swapInDesc, swapOutDesc,
		meminfoReadErrorsDesc, vmstatReadErrorsDesc, pressureReadErrorsDesc,
		pressureWaitingDesc, pressureStalledDesc, oomKillsDesc} {
		ch <- d
	}
}

func (c *swapCollector) Collect(ch chan<- prometheus.Metric) {
	s, err := readSwapFrom(c.gopsutilCtx, c.meminfoPath, c.readMeminfo, c.virtualMemory)
	c.noteResult(sourceMeminfo, err, &c.meminfoErrors)
	if err == nil {
		ch <- prometheus.MustNewConstMetric(swapTotalDesc, prometheus.GaugeValue, float64(s.TotalBytes))
		ch <- prometheus.MustNewConstMetric(swapUsedDesc, prometheus.GaugeValue, float64(s.UsedBytes))
		ch <- prometheus.MustNewConstMetric(swapFreeDesc, prometheus.GaugeValue, float64(s.FreeBytes))
		ch <- prometheus.MustNewConstMetric(swapCachedDesc, prometheus.GaugeValue, float64(s.CachedBytes))
		ch <- prometheus.MustNewConstMetric(swapUsedRatioDesc, prometheus.GaugeValue, s.UsedRatio)
		ch <- prometheus.MustNewConstMetric(memAvailableRatioDesc, prometheus.GaugeValue, s.MemAvailableRatio)
	}
	a, err := readSwapActivityFrom(c.vmstatPath, c.readVmstat)
	c.noteResult(sourceVmstat, err, &c.vmstatErrors)
	if err == nil {
		ch <- prometheus.MustNewConstMetric(swapInDesc, prometheus.CounterValue, float64(a.InPages*c.pageSize))
		ch <- prometheus.MustNewConstMetric(swapOutDesc, prometheus.CounterValue, float64(a.OutPages*c.pageSize))
		if a.HaveOOMKills {
			ch <- prometheus.MustNewConstMetric(oomKillsDesc, prometheus.CounterValue, float64(a.OOMKills))
		}
	}
	p, err := readPressureFrom(c.pressurePath, c.read)
	c.noteResult(sourcePressure, err, &c.pressureErrors)
	switch {
	case err != nil:
	case p.Available:
		ch <- prometheus.MustNewConstMetric(pressureWaitingDesc, prometheus.CounterValue, p.SomeTotal.Seconds())
		ch <- prometheus.MustNewConstMetric(pressureStalledDesc, prometheus.CounterValue, p.FullTotal.Seconds())
	default:
		c.noteNoPSI()
	}
	ch <- prometheus.MustNewConstMetric(meminfoReadErrorsDesc, prometheus.CounterValue, float64(c.meminfoErrors.Load()))
	ch <- prometheus.MustNewConstMetric(vmstatReadErrorsDesc, prometheus.CounterValue, float64(c.vmstatErrors.Load()))
	ch <- prometheus.MustNewConstMetric(pressureReadErrorsDesc, prometheus.CounterValue, float64(c.pressureErrors.Load()))
}

// noteNoPSI logs once per collector that the kernel has no PSI: the host
// will not grow it before a reboot, so once is enough.
func (c *swapCollector) noteNoPSI() {
	if c.noPSILogged.CompareAndSwap(false, true) {
		c.logger.Info("no memory pressure metrics: the kernel has no PSI (no "+pressureFile+" or EOPNOTSUPP)",
			"path", c.pressurePath)
	}
}

func (c *swapCollector) noteResult(source string, err error, counter *atomic.Uint64) {
	if err != nil {
		counter.Add(1)
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	c.mu.Lock()
	prev := c.lastErr[source]
	c.lastErr[source] = msg
	c.mu.Unlock()
	switch {
	case err != nil && msg != prev:
		c.logger.Warn("procfs metrics left out of the scrape", "file", source, "err", err)
	case err != nil:
		c.logger.Debug("procfs metrics still unreadable", "file", source, "err", err)
	case prev != "":
		c.logger.Info("procfs metrics readable again", "file", source)
	}
}
