//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Reader reads every GPU through NVML, one pass per call, sharing a pass
// for Options.TTL. The device handles are taken once at Open. It is safe
// for concurrent use. A pass runs on its own goroutine: callers that
// arrive during it share it, and none waits for it past its deadline
// (Options.Timeout), since one NVML call on a GPU in a bad state can block
// for good. A stuck pass is left to run; no other starts until it returns.
type Reader struct {
	lib     nvml.Interface
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time
	log     *slog.Logger
	has     symbols

	mu     sync.Mutex // never held across an NVML call
	devs   []handle   // written back by each pass, which works on a copy
	last   Snapshot   // the last complete pass
	pass   *pass      // the pass in progress, nil when none
	closed bool

	done     chan struct{} // closed by Close, to stop the watchers
	watchers sync.WaitGroup
}

// pass is one pass over the GPUs in progress.
type pass struct {
	time   time.Time     // by the Reader's clock: its Snapshot's Time
	start  time.Time     // time.Now, for the deadline
	done   chan struct{} // closed when the pass has returned, after res is set
	res    Snapshot
	at     string // the call it is in, under Reader.mu
	logged bool   // a caller found it stuck and logged it, under Reader.mu
}

// symbols says which of the pass's calls the loaded library exports.
// go-nvml binds NVML's functions lazily and checks only the versioned ones
// it chooses between (its updateVersionedSymbols); a call to any other
// function the driver's libnvidia-ml.so.1 lacks is a symbol lookup error
// that kills the process (exit 127) before NVML can answer
// FUNCTION_NOT_FOUND. So the calls that not every driver lavender may
// meet exports are looked up once at Open, and one that is missing is
// never made: its older equivalent is, or its reading is left out as if
// NOT_SUPPORTED. The other calls (utilization, v1 memory, power and its
// limit, ECC counts, the process lists, events, identity) are in every
// driver since long before R470.
type symbols struct {
	clocksEventReasons    bool // nvmlDeviceGetCurrentClocksEventReasons: drivers 535 and later
	clocksThrottleReasons bool // nvmlDeviceGetCurrentClocksThrottleReasons: the same bits, deprecated in NVML 13
	memoryInfoV2          bool // nvmlDeviceGetMemoryInfo_v2: newer than R470
	remappedRows          bool // nvmlDeviceGetRemappedRows: drivers 450 and later
	temperature           bool // nvmlDeviceGetTemperature: deprecated in NVML 13 for GetTemperatureV
}

// lookupSymbols asks the library, which Init has loaded, for each symbol.
// An error of any kind counts as missing: a call not made only leaves a
// reading out, a call made to nothing ends the process.
func lookupSymbols(lib nvml.Interface) symbols {
	ext := lib.Extensions()
	has := func(name string) bool { return ext != nil && ext.LookupSymbol(name) == nil }
	return symbols{
		clocksEventReasons:    has("nvmlDeviceGetCurrentClocksEventReasons"),
		clocksThrottleReasons: has("nvmlDeviceGetCurrentClocksThrottleReasons"),
		memoryInfoV2:          has("nvmlDeviceGetMemoryInfo_v2"),
		remappedRows:          has("nvmlDeviceGetRemappedRows"),
		temperature:           has("nvmlDeviceGetTemperature"),
	}
}

// handle is one GPU as Open found it: its NVML handle and its identity.
type handle struct {
	h  nvml.Device // nil while NVML gives no handle; each pass retries
	id Device      // Index, UUID, BusID, Name
}

// Open loads NVML, initialises it and takes a handle for every GPU. With
// no driver it returns an error that wraps ErrNoDriver, with no GPU one
// that wraps ErrNoGPU; the caller logs it once and runs without GPU
// telemetry (NewCollector takes the error and says why).
func Open(opts Options) (*Reader, error) {
	var lo []nvml.LibraryOption
	if opts.LibraryPath != "" {
		lo = append(lo, nvml.WithLibraryPath(opts.LibraryPath))
	}
	return open(nvml.New(lo...), opts)
}

// open is Open on any nvml.Interface: the tests pass go-nvml's mocks.
func open(lib nvml.Interface, opts Options) (*Reader, error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		// Safe after a failed Init (it answers UNINITIALIZED); every
		// other call would be a missing symbol that kills the process.
		lib.Shutdown()
		return nil, fmt.Errorf("%w: nvml.Init: %w", ErrNoDriver, ret)
	default:
		lib.Shutdown()
		return nil, fmt.Errorf("nvml.Init: %w", ret)
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("nvml.DeviceGetCount: %w", ret)
	}
	if n == 0 {
		lib.Shutdown()
		return nil, ErrNoGPU
	}
	r := &Reader{lib: lib, ttl: opts.ttl(), timeout: opts.timeout(), now: opts.now(), log: opts.logger(),
		done: make(chan struct{}), has: lookupSymbols(lib)}
	r.devs = make([]handle, n)
	for i := range r.devs {
		r.devs[i].id.Index = i
		// A GPU that gives no handle or no identity now is still
		// listed; the passes retry and report why.
		r.identify(&r.devs[i])
	}
	return r, nil
}

// identify takes the handle and reads the identity of a GPU that lacks
// them, returning NVML's answer to the first call that failed.
func (r *Reader) identify(dh *handle) nvml.Return {
	if dh.h == nil {
		h, ret := r.lib.DeviceGetHandleByIndex(dh.id.Index)
		if ret != nvml.SUCCESS {
			return ret
		}
		dh.h = h
	}
	if dh.id.UUID != "" {
		return nvml.SUCCESS
	}
	uuid, ret := dh.h.GetUUID()
	if ret != nvml.SUCCESS {
		return ret
	}
	pci, ret := dh.h.GetPciInfo()
	if ret != nvml.SUCCESS {
		return ret
	}
	name, ret := dh.h.GetName()
	if ret != nvml.SUCCESS {
		return ret
	}
	bus := cString(pci.BusId[:])
	if id, ok := NormalizeBusID(bus); ok {
		bus = id
	} else if bus == "" {
		bus = fmt.Sprintf("%04x:%02x:%02x", pci.Domain, pci.Bus, pci.Device)
	}
	dh.id.UUID, dh.id.BusID, dh.id.Name = uuid, bus, name
	return nvml.SUCCESS
}

// GPUs is how many GPUs Open found, without a pass over them.
func (r *Reader) GPUs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.devs)
}

// Snapshot returns the pass over every GPU, read now or, within the TTL,
// the last one. It waits for a pass at most until the pass's deadline;
// past it, the answer is the last complete pass with ErrStuck (a
// *StuckError) at once, for as long as the stuck pass has not returned.
func (r *Reader) Snapshot() Snapshot {
	if r == nil {
		return Snapshot{Err: ErrClosed}
	}
	r.mu.Lock()
	now := r.now()
	if r.closed {
		r.mu.Unlock()
		return Snapshot{Time: now, Err: ErrClosed}
	}
	if age := now.Sub(r.last.Time); !r.last.Time.IsZero() && age >= 0 && age < r.ttl {
		s := r.last
		r.mu.Unlock()
		return s
	}
	p := r.pass
	if p == nil {
		p = &pass{time: now, start: time.Now(), done: make(chan struct{})}
		r.pass = p
		go r.run(p, slices.Clone(r.devs))
	}
	r.mu.Unlock()

	if wait := r.timeout - time.Since(p.start); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-p.done:
		case <-t.C:
		}
		t.Stop()
	}
	select {
	case <-p.done:
		return p.res
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return Snapshot{Time: now, Err: ErrClosed}
	}
	stuck := &StuckError{Since: p.time, For: time.Since(p.start), At: p.at}
	if !p.logged {
		p.logged = true
		r.log.Warn("GPU telemetry: NVML stopped answering; the GPU readings and rules wait for it, the rest carries on", "err", stuck)
	}
	s := r.last
	s.Duration, s.Err = stuck.For, stuck
	return s
}

// run is one pass, on its own goroutine: NVML's calls cannot be
// interrupted, so a stuck one holds this goroutine alone.
func (r *Reader) run(p *pass, devs []handle) {
	s := Snapshot{Time: p.time, Devices: make([]Device, len(devs))}
	for i := range devs {
		s.Devices[i] = r.read(&devs[i], func(call string) {
			r.mu.Lock()
			p.at = fmt.Sprintf("gpu %d: %s", devs[i].id.Index, call)
			r.mu.Unlock()
		})
	}
	s.Duration = time.Since(p.start)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.devs, r.last, r.pass, p.res = devs, s, nil, s
	close(p.done)
	if p.logged {
		r.log.Info("GPU telemetry: NVML answers again", "stuck_for", s.Duration.Round(time.Millisecond).String())
	}
}

// read is one GPU's part of a pass. A call that answers GPU_IS_LOST ends
// it: the GPU is reported lost, with none of its readings.
// at is told each call before it is made, so a stuck pass says where.
func (r *Reader) read(dh *handle, at func(call string)) Device {
	var errs []error
	lost := false
	// check records a call's answer: SUCCESS sets the field, NOT_SUPPORTED
	// leaves it unset and is no error.
	check := func(call string, ret nvml.Return) bool {
		switch ret {
		case nvml.SUCCESS:
			return true
		case nvml.ERROR_NOT_SUPPORTED:
		case nvml.ERROR_GPU_IS_LOST:
			lost = true
		default:
			errs = append(errs, fmt.Errorf("%s: %w", call, ret))
		}
		return false
	}
	at("identify")
	if ret := r.identify(dh); !check("identify", ret) {
		d := dh.id
		d.Lost = lost
		d.Err = errors.Join(errs...)
		return d
	}
	d := dh.id
	h := dh.h
	steps := []func(){
		func() {
			at("GetUtilizationRates")
			u, ret := h.GetUtilizationRates()
			if check("GetUtilizationRates", ret) {
				d.Supported |= FieldUtilization
				d.SMUtil, d.MemUtil = u.Gpu, u.Memory
			}
		},
		func() {
			// v2 leaves out the memory the driver reserves, so an idle
			// GPU reads near 0; drivers before it have only v1.
			m, ret := nvml.Memory_v2{}, nvml.ERROR_FUNCTION_NOT_FOUND
			if r.has.memoryInfoV2 {
				at("GetMemoryInfo_v2")
				m, ret = h.GetMemoryInfo_v2()
			}
			switch ret {
			case nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_ARGUMENT_VERSION_MISMATCH, nvml.ERROR_NOT_SUPPORTED:
				at("GetMemoryInfo")
				m1, ret1 := h.GetMemoryInfo()
				m, ret = nvml.Memory_v2{Total: m1.Total, Used: m1.Used, Free: m1.Free}, ret1
			}
			if check("GetMemoryInfo", ret) {
				d.Supported |= FieldMemory
				d.MemUsed, d.MemTotal = m.Used, m.Total
			}
		},
		func() {
			at("GetPowerUsage")
			mw, ret := h.GetPowerUsage()
			if check("GetPowerUsage", ret) {
				d.Supported |= FieldPower
				d.PowerW = float64(mw) / 1000
			}
		},
		func() {
			at("GetEnforcedPowerLimit")
			mw, ret := h.GetEnforcedPowerLimit()
			if check("GetEnforcedPowerLimit", ret) {
				d.Supported |= FieldPowerLimit
				d.PowerLimitW = float64(mw) / 1000
			}
		},
		func() {
			// GetTemperature is deprecated in NVML 13 for GetTemperatureV,
			// which drivers before 565 lack; the old call serves both.
			if !r.has.temperature {
				return
			}
			at("GetTemperature")
			c, ret := h.GetTemperature(nvml.TEMPERATURE_GPU)
			if check("GetTemperature", ret) {
				d.Supported |= FieldTemperature
				d.TempC = c
			}
		},
		func() {
			// The throttle reasons are the event reasons under their old
			// name, bit for bit; drivers before 535 have only them.
			var reasons uint64
			call, ret := "GetCurrentClocksEventReasons", nvml.ERROR_FUNCTION_NOT_FOUND
			if r.has.clocksEventReasons {
				at("GetCurrentClocksEventReasons")
				reasons, ret = h.GetCurrentClocksEventReasons()
			}
			if ret == nvml.ERROR_FUNCTION_NOT_FOUND && r.has.clocksThrottleReasons {
				call = "GetCurrentClocksThrottleReasons"
				at("GetCurrentClocksThrottleReasons")
				reasons, ret = h.GetCurrentClocksThrottleReasons()
			}
			if ret == nvml.ERROR_FUNCTION_NOT_FOUND {
				ret = nvml.ERROR_NOT_SUPPORTED
			}
			if check(call, ret) {
				d.Supported |= FieldClockEvents
				d.ClockEventReasons = ClockEventReasons(reasons)
			}
		},
		func() {
			at("GetTotalEccErrors")
			v, ret := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
			if !check("GetTotalEccErrors(volatile)", ret) {
				return
			}
			at("GetTotalEccErrors")
			a, ret := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC)
			if check("GetTotalEccErrors(aggregate)", ret) {
				d.Supported |= FieldECC
				d.ECCVolatileUncorrected, d.ECCAggregateUncorrected = v, a
			}
		},
		func() {
			if !r.has.remappedRows {
				return
			}
			at("GetRemappedRows")
			c, u, pending, failed, ret := h.GetRemappedRows()
			if check("GetRemappedRows", ret) {
				d.Supported |= FieldRemappedRows
				d.RemappedRows = RemappedRows{Correctable: c, Uncorrectable: u, Pending: pending, Failed: failed}
			}
		},
		func() {
			// Without the privilege to see other users' processes NVML
			// answers NO_PERMISSION: the count is unknown, not an error.
			procs := func(call string, get func() ([]nvml.ProcessInfo, nvml.Return)) bool {
				at(call)
				ps, ret := get()
				if ret == nvml.ERROR_NO_PERMISSION {
					return false
				}
				if !check(call, ret) {
					return false
				}
				for _, p := range ps {
					if !containsPid(d.Pids, p.Pid) {
						d.Pids = append(d.Pids, p.Pid)
					}
				}
				return true
			}
			c := procs("GetComputeRunningProcesses", h.GetComputeRunningProcesses)
			if lost {
				return
			}
			g := procs("GetGraphicsRunningProcesses", h.GetGraphicsRunningProcesses)
			if c || g {
				d.Supported |= FieldProcesses
			}
		},
	}
	for _, step := range steps {
		if lost {
			break
		}
		step()
	}
	if lost {
		d = dh.id
		d.Lost = true
	}
	for i, err := range errs {
		errs[i] = fmt.Errorf("gpu %d: %w", d.Index, err)
	}
	d.Err = errors.Join(errs...)
	return d
}

func containsPid(pids []uint32, p uint32) bool {
	for _, q := range pids {
		if q == p {
			return true
		}
	}
	return false
}

// Close stops the Xid watchers, waits for them and for a pass in
// progress (up to its deadline), and shuts NVML down. Snapshot then
// answers ErrClosed. A pass still stuck in NVML is left to the process's
// exit: shutting the library down under it could crash the process in
// the driver, and waiting could hold the exit for good.
func (r *Reader) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.done)
	p := r.pass
	r.mu.Unlock()
	r.watchers.Wait()
	if p != nil {
		t := time.NewTimer(max(r.timeout-time.Since(p.start), 0))
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			return fmt.Errorf("nvml.Shutdown not called: %w", ErrStuck)
		}
	}
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml.Shutdown: %w", ret)
	}
	return nil
}
