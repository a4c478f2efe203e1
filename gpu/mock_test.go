//go:build cgo

package gpu

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// The PCI buses of a DGX H100/H200's eight GPUs.
// testBuses are the mock GPUs' PCI buses: a DGX H200's eight, then eight
// more for a 16-GPU host (an HGX B200 or a two-node test rig).
var testBuses = []uint32{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb, 0x19, 0x2b, 0x3b, 0x5e, 0x9b, 0xac, 0xbb, 0xdc}

// reading is what one mock GPU answers; a nonzero Return makes that call
// fail with it.
type reading struct {
	util                     nvml.Utilization
	memUsed                  uint64
	powerMW, limitMW         uint32
	tempC                    uint32
	reasons                  uint64
	eccVolatile, eccAggr     uint64
	remapC, remapU           int
	remapPending, remapFail  bool
	compute, graphics        []uint32
	utilRet, memRet, powRet  nvml.Return
	limitRet, tempRet        nvml.Return
	reasonRet, eccRet        nvml.Return
	remapRet, procRet, gfRet nvml.Return
}

func defaultReading(i int) reading {
	return reading{
		util:    nvml.Utilization{Gpu: 97, Memory: 41},
		memUsed: 80 << 30,
		powerMW: 650500, limitMW: 700000, tempC: 61,
		reasons:     nvml.ClocksEventReasonSwPowerCap,
		eccVolatile: 0, eccAggr: 2,
		remapC: 3, remapU: 1,
		compute:  []uint32{uint32(4000 + i), 4242},
		graphics: []uint32{4242},
	}
}

// testServer is go-nvml's DGX H200 mock with n GPUs whose identity is
// fixed (the mock draws random UUIDs and leaves the bus id empty) and
// whose telemetry calls, which the mock leaves unwired, answer reading.
func testServer(n int, readings ...func(i int, r *reading)) *server.Server {
	s := dgxh200.NewWithGPUs(gpus.Multiple(n, gpus.H200_SXM5_141GB)...)
	for i, dev := range s.Devices {
		d := dev.(*server.Device)
		r := defaultReading(i)
		for _, f := range readings {
			f(i, &r)
		}
		wireDevice(d, i, r)
	}
	return s
}

func testUUID(i int) string { return fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i) }

func wireDevice(d *server.Device, i int, r reading) {
	d.UUID = testUUID(i)
	var busID [32]int8
	for j, c := range fmt.Sprintf("%08X:%02X:00.0", 0, testBuses[i]) {
		busID[j] = int8(c)
	}
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		return nvml.PciInfo{Bus: testBuses[i], PciDeviceId: d.Config.PciDeviceId, BusId: busID}, nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return r.util, r.utilRet }
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		t := d.Config.MemoryMB << 20
		return nvml.Memory_v2{Total: t, Used: r.memUsed, Free: t - r.memUsed}, r.memRet
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return r.powerMW, r.powRet }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return r.limitMW, r.limitRet }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return r.tempC, r.tempRet }
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return r.reasons, r.reasonRet }
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return r.reasons, r.reasonRet }
	d.GetTotalEccErrorsFunc = func(_ nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if c == nvml.VOLATILE_ECC {
			return r.eccVolatile, r.eccRet
		}
		return r.eccAggr, r.eccRet
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		return r.remapC, r.remapU, r.remapPending, r.remapFail, r.remapRet
	}
	procs := func(pids []uint32) []nvml.ProcessInfo {
		out := make([]nvml.ProcessInfo, len(pids))
		for j, p := range pids {
			out[j] = nvml.ProcessInfo{Pid: p, UsedGpuMemory: 1 << 30}
		}
		return out
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return procs(r.compute), r.procRet }
	d.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return procs(r.graphics), r.gfRet }
}

// fakeEvents is an NVML event set fed from a channel.
type fakeEvents struct {
	mock.EventSet
	ch    chan nvml.EventData
	mu    sync.Mutex
	freed bool
}

func newFakeEvents() *fakeEvents {
	e := &fakeEvents{ch: make(chan nvml.EventData, 16)}
	e.WaitFunc = func(ms uint32) (nvml.EventData, nvml.Return) {
		select {
		case ev := <-e.ch:
			return ev, nvml.SUCCESS
		case <-time.After(time.Duration(ms) * time.Millisecond):
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
	e.FreeFunc = func() nvml.Return {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.freed = true
		return nvml.SUCCESS
	}
	return e
}

func (e *fakeEvents) isFreed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.freed
}
