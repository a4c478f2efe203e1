//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// allFields is every reading of a healthy GPU.
const allFields = FieldUtilization | FieldMemory | FieldPower | FieldPowerLimit | FieldTemperature |
	FieldClockEvents | FieldECC | FieldRemappedRows | FieldProcesses

func openTest(t testing.TB, s *server.Server, opts Options) *Reader {
	t.Helper()
	r, err := open(s, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestSnapshotReadsEveryGPU(t *testing.T) {
	r := openTest(t, testServer(8), Options{})
	s := r.Snapshot()
	if s.Err != nil || len(s.Devices) != 8 {
		t.Fatalf("snapshot: %d devices, err %v", len(s.Devices), s.Err)
	}
	all := allFields
	for i, d := range s.Devices {
		if d.Err != nil || d.Lost || d.Supported != all {
			t.Errorf("gpu %d: err %v lost %v supported %b", i, d.Err, d.Lost, d.Supported)
		}
		want := Device{
			Index: i, UUID: testUUID(i), BusID: []string{"0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00",
				"0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00"}[i],
			Name: "NVIDIA H200 141GB HBM3e", Supported: all,
			SMUtil: 97, MemUtil: 41, MemUsed: 80 << 30, MemTotal: 144384 << 20,
			PowerW: 650.5, PowerLimitW: 700, TempC: 61,
			ClockEventReasons: ReasonSWPowerCap, ECCAggregateUncorrected: 2,
			RemappedRows: RemappedRows{Correctable: 3, Uncorrectable: 1},
			Pids:         []uint32{uint32(4000 + i), 4242}, // 4242 is in both lists, counted once
		}
		if !deviceEqual(d, want) {
			t.Errorf("gpu %d:\n got %+v\nwant %+v", i, d, want)
		}
	}
}

// TestSnapshotReadsSixteenGPUs: a host with sixteen GPUs is read in one
// pass, each with its own index, bus id and processes, in NVML's order.
func TestSnapshotReadsSixteenGPUs(t *testing.T) {
	r := openTest(t, testServer(16), Options{})
	if n := r.GPUs(); n != 16 {
		t.Errorf("GPUs() = %d before any pass, want 16", n)
	}
	s := r.Snapshot()
	if s.Err != nil || len(s.Devices) != 16 {
		t.Fatalf("snapshot: %d devices, err %v", len(s.Devices), s.Err)
	}
	seen := map[string]bool{}
	for i, d := range s.Devices {
		if d.Index != i || d.UUID != testUUID(i) || seen[d.BusID] || d.Err != nil || len(d.Pids) != 2 || d.Pids[0] != uint32(4000+i) {
			t.Errorf("gpu %d: %+v", i, d)
		}
		seen[d.BusID] = true
	}
	if s.Devices[15].BusID != "0000:dc:00" {
		t.Errorf("the 16th GPU's bus id %q, want 0000:dc:00", s.Devices[15].BusID)
	}
}

func deviceEqual(a, b Device) bool {
	return slices.Equal(a.Pids, b.Pids) && (a.Err == nil) == (b.Err == nil) &&
		fmt.Sprintf("%+v", withoutSlices(a)) == fmt.Sprintf("%+v", withoutSlices(b))
}

func withoutSlices(d Device) Device {
	d.Pids, d.Err = nil, nil
	return d
}

func TestNotSupportedIsLeftOutNotZero(t *testing.T) {
	ns := nvml.ERROR_NOT_SUPPORTED
	r := openTest(t, testServer(2, func(i int, r *reading) {
		if i == 0 {
			r.utilRet, r.powRet, r.limitRet, r.tempRet, r.reasonRet = ns, ns, ns, ns, ns
			r.eccRet, r.remapRet, r.procRet, r.gfRet = ns, ns, ns, ns
		}
	}), Options{})
	d := r.Snapshot().Devices[0]
	if d.Supported != FieldMemory || d.Err != nil || d.Lost {
		t.Errorf("supported %b (want only memory), err %v, lost %v", d.Supported, d.Err, d.Lost)
	}
	if d.Has(FieldECC) || d.Has(FieldRemappedRows) || d.Has(FieldPower) {
		t.Error("Has says an unsupported field is there")
	}
	if d1 := r.Snapshot().Devices[1]; !d1.Has(FieldECC) {
		t.Error("the other GPU lost its ECC counts")
	}
}

func TestLostGPUMidPass(t *testing.T) {
	srv := testServer(4, func(i int, r *reading) {
		if i == 2 {
			// Utilization and memory answered; then the GPU fell off.
			r.powRet = nvml.ERROR_GPU_IS_LOST
		}
	})
	r := openTest(t, srv, Options{})
	s := r.Snapshot()
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	lost := s.Devices[2]
	if !lost.Lost || lost.Supported != 0 || lost.Err != nil {
		t.Errorf("lost GPU: lost %v supported %b err %v", lost.Lost, lost.Supported, lost.Err)
	}
	if lost.UUID != testUUID(2) || lost.BusID != "0000:3a:00" {
		t.Errorf("lost GPU lost its identity: %q %q", lost.UUID, lost.BusID)
	}
	// The pass stopped asking the lost GPU after GPU_IS_LOST.
	if n := len(srv.Devices[2].(*server.Device).GetTemperatureCalls()); n != 0 {
		t.Errorf("lost GPU asked for its temperature %d times", n)
	}
	for _, i := range []int{0, 1, 3} {
		if d := s.Devices[i]; d.Lost || !d.Has(FieldPower) {
			t.Errorf("gpu %d: lost %v supported %b", i, d.Lost, d.Supported)
		}
	}
}

func TestLostAtOpenIsReported(t *testing.T) {
	srv := testServer(2)
	srv.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 1 {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return srv.Devices[i], nvml.SUCCESS
	}
	r := openTest(t, srv, Options{})
	d := r.Snapshot().Devices[1]
	if !d.Lost || d.Index != 1 || d.Err != nil {
		t.Errorf("GPU lost at Open: %+v", d)
	}
}

func TestCallFailuresNameTheCall(t *testing.T) {
	r := openTest(t, testServer(2, func(i int, r *reading) {
		if i == 1 {
			r.tempRet = nvml.ERROR_UNKNOWN
			r.remapRet = nvml.ERROR_RESET_REQUIRED
		}
	}), Options{})
	d := r.Snapshot().Devices[1]
	if d.Err == nil || !errors.Is(d.Err, nvml.ERROR_UNKNOWN) || !errors.Is(d.Err, nvml.ERROR_RESET_REQUIRED) {
		t.Fatalf("err %v", d.Err)
	}
	for _, s := range []string{"gpu 1: GetTemperature: ERROR_UNKNOWN", "gpu 1: GetRemappedRows: ERROR_RESET_REQUIRED"} {
		if !strings.Contains(d.Err.Error(), s) {
			t.Errorf("err %q lacks %q", d.Err, s)
		}
	}
	if d.Has(FieldTemperature) || !d.Has(FieldPower) {
		t.Errorf("supported %b", d.Supported)
	}
}

func TestProcessesWithoutPermission(t *testing.T) {
	r := openTest(t, testServer(1, func(_ int, r *reading) {
		r.procRet, r.gfRet = nvml.ERROR_NO_PERMISSION, nvml.ERROR_NO_PERMISSION
	}), Options{})
	d := r.Snapshot().Devices[0]
	if d.Has(FieldProcesses) || d.Err != nil || d.Pids != nil {
		t.Errorf("supported %b err %v pids %v", d.Supported, d.Err, d.Pids)
	}
}

func TestGraphicsUnsupportedStillCountsCompute(t *testing.T) {
	r := openTest(t, testServer(1, func(_ int, r *reading) { r.gfRet = nvml.ERROR_NOT_SUPPORTED }), Options{})
	d := r.Snapshot().Devices[0]
	if !d.Has(FieldProcesses) || len(d.Pids) != 2 {
		t.Errorf("supported %b pids %v", d.Supported, d.Pids)
	}
}

func TestMemoryInfoFallsBackToV1(t *testing.T) {
	srv := testServer(1)
	d := srv.Devices[0].(*server.Device)
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_FUNCTION_NOT_FOUND }
	d.MemoryInfo.Used = 1 << 30
	got := openTest(t, srv, Options{}).Snapshot().Devices[0]
	if !got.Has(FieldMemory) || got.MemUsed != 1<<30 || got.MemTotal != d.MemoryInfo.Total {
		t.Errorf("memory %d/%d supported %b", got.MemUsed, got.MemTotal, got.Supported)
	}
}

// An older driver's library lacks NVML's newer functions, and go-nvml
// checks few of them: a call to one that is missing is a symbol lookup
// error that kills the process. The pass makes none of them; it reads the
// older equivalent or leaves the reading out.
func TestOldDriverCallsOnlyWhatItExports(t *testing.T) {
	for _, tc := range []struct {
		name    string
		missing []string
		want    Field // Supported
		memUsed uint64
	}{
		{"R530", []string{"nvmlDeviceGetCurrentClocksEventReasons"}, allFields, 80 << 30},
		{"R470", []string{"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetMemoryInfo_v2"}, allFields, 1 << 30},
		{"none of them", []string{"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
			"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetRemappedRows", "nvmlDeviceGetTemperature"},
			allFields &^ (FieldClockEvents | FieldRemappedRows | FieldTemperature), 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testServer(2)
			srv.LookupSymbolFunc = func(name string) error {
				if slices.Contains(tc.missing, name) {
					return fmt.Errorf("undefined symbol: %s", name)
				}
				return nil
			}
			dying := func(name string) {
				if slices.Contains(tc.missing, name) {
					t.Errorf("%s called, which the library lacks: the process would die", name)
				}
			}
			for _, dev := range srv.Devices {
				d := dev.(*server.Device)
				d.MemoryInfo.Used = 1 << 30
				ev, th, m2, rr, tm := d.GetCurrentClocksEventReasonsFunc, d.GetCurrentClocksThrottleReasonsFunc,
					d.GetMemoryInfo_v2Func, d.GetRemappedRowsFunc, d.GetTemperatureFunc
				d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
					dying("nvmlDeviceGetCurrentClocksEventReasons")
					return ev()
				}
				d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) {
					dying("nvmlDeviceGetCurrentClocksThrottleReasons")
					return th()
				}
				d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
					dying("nvmlDeviceGetMemoryInfo_v2")
					return m2()
				}
				d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
					dying("nvmlDeviceGetRemappedRows")
					return rr()
				}
				d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
					dying("nvmlDeviceGetTemperature")
					return tm(s)
				}
			}
			s := openTest(t, srv, Options{}).Snapshot()
			for _, d := range s.Devices {
				if d.Err != nil || d.Lost || d.Supported != tc.want {
					t.Errorf("gpu %d: err %v lost %v supported %b, want %b", d.Index, d.Err, d.Lost, d.Supported, tc.want)
				}
				if d.MemUsed != tc.memUsed {
					t.Errorf("gpu %d: memory used %d, want %d", d.Index, d.MemUsed, tc.memUsed)
				}
				if d.Has(FieldClockEvents) && d.ClockEventReasons != ReasonSWPowerCap {
					t.Errorf("gpu %d: clock event reasons %#x, want the power cap's bit", d.Index, d.ClockEventReasons)
				}
			}
		})
	}
}

func TestOpenWithoutDriver(t *testing.T) {
	for _, tc := range []struct {
		ret    nvml.Return
		reason string
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "no_driver"},
		{nvml.ERROR_DRIVER_NOT_LOADED, "no_driver"},
		{nvml.ERROR_LIB_RM_VERSION_MISMATCH, "nvml_error"},
	} {
		srv := testServer(1)
		srv.InitFunc = func() nvml.Return { return tc.ret }
		srv.DeviceGetCountFunc = func() (int, nvml.Return) {
			t.Error("DeviceGetCount after a failed Init (a missing symbol kills the process)")
			return 0, nvml.ERROR_UNINITIALIZED
		}
		r, err := open(srv, Options{})
		if r != nil || err == nil {
			t.Fatalf("%v: open gave %v, %v", tc.ret, r, err)
		}
		if got := Reason(err); got != tc.reason {
			t.Errorf("%v: reason %q, want %q (err %v)", tc.ret, got, tc.reason, err)
		}
		if !errors.Is(err, tc.ret) || !strings.Contains(err.Error(), "nvml.Init") {
			t.Errorf("%v: error %q does not say what failed", tc.ret, err)
		}
	}
}

func TestOpenWithoutGPU(t *testing.T) {
	srv := testServer(0)
	r, err := open(srv, Options{})
	if r != nil || !errors.Is(err, ErrNoGPU) || Reason(err) != "no_gpu" {
		t.Fatalf("open: %v, %v", r, err)
	}
	if len(srv.ShutdownCalls()) != 1 {
		t.Error("NVML not shut down after finding no GPU")
	}
}

// On this machine, as on any host without the NVIDIA driver, the real
// library is not there: Open says so and loads nothing else.
func TestOpenRealLibraryMissing(t *testing.T) {
	r, err := Open(Options{LibraryPath: "/nonexistent/libnvidia-ml.so.1"})
	if r != nil || !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Open with a missing library: %v, %v", r, err)
	}
	r, err = Open(Options{})
	if err == nil {
		r.Close()
		t.Skip("this host has the NVIDIA driver")
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Errorf("Open on a host without the driver: %v", err)
	}
}

func TestCacheSharesOnePass(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	srv := testServer(2)
	r := openTest(t, srv, Options{Now: clock})
	passes := func() int { return len(srv.Devices[0].(*server.Device).GetPowerUsageCalls()) }

	var wg sync.WaitGroup
	for range 8 { // a scrape and the watchdog's poll at once
		wg.Add(1)
		go func() { defer wg.Done(); r.Snapshot() }()
	}
	wg.Wait()
	if passes() != 1 {
		t.Fatalf("%d passes for concurrent callers, want 1", passes())
	}
	advance(DefaultTTL - time.Millisecond)
	r.Snapshot()
	if passes() != 1 {
		t.Errorf("a call within the TTL made a pass")
	}
	advance(time.Millisecond)
	if s := r.Snapshot(); passes() != 2 || !s.Time.Equal(now) {
		t.Errorf("%d passes after the TTL, snapshot of %v", passes(), s.Time)
	}

	r2 := openTest(t, testServer(1), Options{TTL: -1, Now: clock})
	r2.Snapshot()
	r2.Snapshot()
	if n := len(r2.lib.(*server.Server).Devices[0].(*server.Device).GetPowerUsageCalls()); n != 2 {
		t.Errorf("TTL < 0: %d passes, want 2", n)
	}
}

func TestCloseShutsNVMLDown(t *testing.T) {
	srv := testServer(1)
	r, err := open(srv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := len(srv.ShutdownCalls()); n != 1 {
		t.Errorf("%d Shutdown calls", n)
	}
	if s := r.Snapshot(); !errors.Is(s.Err, ErrClosed) {
		t.Errorf("snapshot after Close: %v", s.Err)
	}
	var nilReader *Reader
	if s := nilReader.Snapshot(); !errors.Is(s.Err, ErrClosed) || nilReader.Close() != nil {
		t.Error("a nil Reader is not closed")
	}
}
