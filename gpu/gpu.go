// Package gpu reads NVIDIA GPUs through NVML (github.com/NVIDIA/go-nvml):
// one pass over every device per call, cached briefly so that a scrape and
// the watchdog's poll share it; a Prometheus collector of that pass; and
// the driver's Xid events, a second source beside the kernel log.
//
// NVML needs cgo and the driver's libnvidia-ml.so.1 at run time. A build
// without cgo has the same API and reports the telemetry off (ErrNoCgo);
// a host without the driver or without a GPU gets ErrNoDriver or ErrNoGPU
// from Open, so the caller logs one line and carries on without GPUs.
//
// This file and the others without a build constraint use no NVML type,
// so any package can hold a Snapshot in any build.
package gpu

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Why Open gives no Reader. Callers tell them apart with errors.Is; each
// one is a normal state of a host, not a failure to alarm on.
var (
	// ErrNoCgo: this binary was built with CGO_ENABLED=0 and cannot load
	// NVML at all.
	ErrNoCgo = errors.New("built without cgo: GPU telemetry off")
	// ErrNoDriver: libnvidia-ml.so.1 is not there, or the kernel driver
	// is not loaded.
	ErrNoDriver = errors.New("no NVIDIA driver (libnvidia-ml.so.1 not found or driver not loaded): GPU telemetry off")
	// ErrNoGPU: NVML works but counts no device.
	ErrNoGPU = errors.New("NVML sees no GPU: GPU telemetry off")
	// ErrClosed: the Reader was closed.
	ErrClosed = errors.New("gpu reader closed")
	// ErrDisabled: the user turned GPU telemetry off (--no-gpu), so NVML
	// was never loaded.
	ErrDisabled = errors.New("turned off (--no-gpu): GPU telemetry off")
	// ErrStuck: a pass has run past its deadline (PassTimeout) without
	// NVML answering; a Snapshot's Err is then a *StuckError.
	ErrStuck = errors.New("NVML stopped answering")
)

// StuckError is a Snapshot's Err while a pass is stuck in an NVML call:
// the Snapshot then holds the last complete pass's Devices (none when no
// pass ever completed), to show marked stale, and nothing may be judged
// from them.
type StuckError struct {
	Since time.Time     // when the stuck pass started, by the Reader's clock
	For   time.Duration // how long it had run when this was answered
	At    string        // the call it waits in: "gpu 1: GetPowerUsage"
}

func (e *StuckError) Error() string {
	at := ""
	if e.At != "" {
		at = " in " + e.At
	}
	return fmt.Sprintf("%v: a pass has waited %s%s", ErrStuck, e.For.Round(100*time.Millisecond), at)
}

// Is makes errors.Is(err, ErrStuck) true.
func (e *StuckError) Is(target error) bool { return target == ErrStuck }

// PassTimeout is how long a caller of Snapshot waits for a pass before it
// is answered without one (ErrStuck). A pass takes milliseconds on a
// healthy host (the process lists, the slowest calls, a few each), but an
// NVML call on a GPU in a bad state (the GSP's RPC timeouts, around an Xid
// 79) can block for tens of seconds or for good, and the caller is a
// Prometheus scrape (10 s timeout by default, for the whole of /metrics),
// the status page or the watchdog's poll. Three seconds is hundreds of
// healthy passes and leaves a scrape most of its time. The stuck pass runs
// on; no other starts until it returns.
const PassTimeout = 3 * time.Second

// Reason is the reason label of lavender_gpu_telemetry_enabled for an
// error from Open: "" for none, "no_cgo", "no_driver", "no_gpu", "closed"
// (after Close), "disabled" (ErrDisabled), or "nvml_error" for any other
// failure.
func Reason(openErr error) string {
	switch {
	case openErr == nil:
		return ""
	case errors.Is(openErr, ErrNoCgo):
		return "no_cgo"
	case errors.Is(openErr, ErrNoDriver):
		return "no_driver"
	case errors.Is(openErr, ErrNoGPU):
		return "no_gpu"
	case errors.Is(openErr, ErrClosed):
		return "closed"
	case errors.Is(openErr, ErrDisabled):
		return "disabled"
	}
	return "nvml_error"
}

// DefaultTTL is how long a Reader serves one pass to every caller. The
// watchdog polls and Prometheus scrapes on their own clocks; within one
// second they read the same pass, so NVML, whose calls take the driver's
// lock, is asked once. NVML's own utilization sample period is 1/6 s to
// 1 s, so a fresher pass would show little new.
const DefaultTTL = time.Second

// Options configure Open.
type Options struct {
	// TTL is how long a pass is served again; DefaultTTL when 0, no
	// cache when negative.
	TTL time.Duration
	// LibraryPath is the NVML library to load; "" is the driver's
	// libnvidia-ml.so.1 through the dynamic loader's search path.
	LibraryPath string
	// Now is the clock for the cache (time.Now when nil), for tests.
	Now func() time.Time
	// Timeout is how long Snapshot waits for a pass (PassTimeout when
	// 0), for tests.
	Timeout time.Duration
	// Logger gets one line when a pass is found stuck and one when it
	// returns; nil logs nothing.
	Logger *slog.Logger
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return PassTimeout
}

func (o Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (o Options) ttl() time.Duration {
	switch {
	case o.TTL == 0:
		return DefaultTTL
	case o.TTL < 0:
		return 0
	}
	return o.TTL
}

func (o Options) now() func() time.Time {
	if o.Now != nil {
		return o.Now
	}
	return time.Now
}

// Snapshot is one NVML pass over every GPU.
type Snapshot struct {
	Time     time.Time     // when the pass started
	Duration time.Duration // how long the pass took
	// Devices, by NVML index. A cached pass hands every caller the same
	// slice: read it, never change it.
	Devices []Device
	// Err is a failure of the pass as a whole: the Reader closed, or a
	// pass stuck in NVML (ErrStuck, a *StuckError; Devices are then the
	// last complete pass's, stale). A device's own failures are in its
	// Device.Err.
	Err error
}

// Field names one reading of a Device, for Device.Has.
type Field uint16

const (
	FieldUtilization  Field = 1 << iota // SMUtil, MemUtil
	FieldMemory                         // MemUsed, MemTotal
	FieldPower                          // PowerW
	FieldPowerLimit                     // PowerLimitW
	FieldTemperature                    // TempC
	FieldClockEvents                    // ClockEventReasons
	FieldECC                            // ECCVolatileUncorrected, ECCAggregateUncorrected
	FieldRemappedRows                   // RemappedRows
	FieldProcesses                      // Pids
)

// Device is one GPU as one pass read it. Identity (Index, UUID, BusID,
// Name) is read once at Open, so a GPU that is lost later keeps its name.
// A reading the GPU does not support (NVML's NOT_SUPPORTED, or
// NO_PERMISSION for the process lists) is left out of Supported and is
// not exported as a metric: zero would read as a real value.
type Device struct {
	Index int
	UUID  string // "GPU-…"
	// BusID is the PCI address in the kernel log's form, "0000:3b:00"
	// (see NormalizeBusID), so that it equals kmsg.Fault.GPU for the same
	// GPU.
	BusID string
	Name  string // "NVIDIA H200"

	Supported Field

	SMUtil, MemUtil   uint32 // percent of the last sample period
	MemUsed, MemTotal uint64 // bytes
	PowerW            float64
	PowerLimitW       float64 // the enforced limit
	TempC             uint32

	ClockEventReasons ClockEventReasons

	// ECC uncorrected error counts: volatile since the driver loaded,
	// aggregate over the GPU's life. Unsupported where ECC is off.
	ECCVolatileUncorrected  uint64
	ECCAggregateUncorrected uint64

	RemappedRows RemappedRows

	// Pids are the processes on the GPU, compute and graphics together,
	// each once, in the host's pid namespace.
	Pids []uint32

	// Lost: the GPU answered ERROR_GPU_IS_LOST (fallen off the bus); its
	// readings are left out of Supported.
	Lost bool

	// Err joins the failures of this pass's readings other than
	// NOT_SUPPORTED and GPU_IS_LOST, each naming its call.
	Err error
}

// Has reports whether the pass read f on this device.
func (d Device) Has(f Field) bool { return d.Supported&f != 0 }

// RemappedRows is the GPU's row remapping (Ampere and newer): rows of
// HBM the GPU replaced for correctable and uncorrectable errors, a remap
// waiting for the next GPU reset, and a remap that failed (the GPU
// should be replaced).
type RemappedRows struct {
	Correctable, Uncorrectable int
	Pending, Failed            bool
}

// ClockEventReasons is NVML's bitmask of why the clocks are below their
// maximum (nvmlClocksEventReason*; formerly "throttle reasons").
type ClockEventReasons uint64

// The bits, as nvml.h defines them.
const (
	ReasonGpuIdle                   ClockEventReasons = 0x1
	ReasonApplicationsClocksSetting ClockEventReasons = 0x2
	ReasonSWPowerCap                ClockEventReasons = 0x4
	ReasonHWSlowdown                ClockEventReasons = 0x8
	ReasonSyncBoost                 ClockEventReasons = 0x10
	ReasonSWThermalSlowdown         ClockEventReasons = 0x20
	ReasonHWThermalSlowdown         ClockEventReasons = 0x40
	ReasonHWPowerBrakeSlowdown      ClockEventReasons = 0x80
	ReasonDisplayClockSetting       ClockEventReasons = 0x100
)

// ClockEventReasonNames names every bit the collector exports, in a fixed
// order: the reason label of lavender_gpu_clock_event_reason_active.
var ClockEventReasonNames = []struct {
	Bit  ClockEventReasons
	Name string
}{
	{ReasonGpuIdle, "gpu_idle"},
	{ReasonApplicationsClocksSetting, "applications_clocks_setting"},
	{ReasonSWPowerCap, "sw_power_cap"},
	{ReasonHWSlowdown, "hw_slowdown"},
	{ReasonSyncBoost, "sync_boost"},
	{ReasonSWThermalSlowdown, "sw_thermal_slowdown"},
	{ReasonHWThermalSlowdown, "hw_thermal_slowdown"},
	{ReasonHWPowerBrakeSlowdown, "hw_power_brake_slowdown"},
	{ReasonDisplayClockSetting, "display_clock_setting"},
}

// Idle: nothing runs on the GPU.
func (r ClockEventReasons) Idle() bool { return r&ReasonGpuIdle != 0 }

// SWPowerCap: the driver holds the clocks down to stay under the power
// limit, normal under full load.
func (r ClockEventReasons) SWPowerCap() bool { return r&ReasonSWPowerCap != 0 }

// HWSlowdown: the hardware halved the clocks or more (too hot, power
// brake, or the power supply); the HW* helpers below say which.
func (r ClockEventReasons) HWSlowdown() bool { return r&ReasonHWSlowdown != 0 }

// HWThermalSlowdown: the hardware slowed the GPU for its temperature.
func (r ClockEventReasons) HWThermalSlowdown() bool { return r&ReasonHWThermalSlowdown != 0 }

// HWPowerBrakeSlowdown: an external power brake (the system's power
// supply) slowed the GPU.
func (r ClockEventReasons) HWPowerBrakeSlowdown() bool { return r&ReasonHWPowerBrakeSlowdown != 0 }

// SWThermalSlowdown: the driver slowed the GPU to keep it under its
// maximum operating temperature.
func (r ClockEventReasons) SWThermalSlowdown() bool { return r&ReasonSWThermalSlowdown != 0 }

// SyncBoost: the GPU runs at its sync-boost group's lowest clocks.
func (r ClockEventReasons) SyncBoost() bool { return r&ReasonSyncBoost != 0 }

// AnyHW: any hardware slowdown, the ones that cost a training run real
// speed and are not the normal power cap.
func (r ClockEventReasons) AnyHW() bool {
	return r&(ReasonHWSlowdown|ReasonHWThermalSlowdown|ReasonHWPowerBrakeSlowdown) != 0
}
