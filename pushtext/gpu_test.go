package pushtext

import (
	"testing"
	"time"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/watchdog"
)

func TestGPURange(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{0, 1, 2, 3, 4, 5, 6, 7}, "0–7"},
		{[]int{6, 0, 1, 2, 3}, "0–3,6"},
		{[]int{5}, "5"},
		{[]int{2, 3}, "2,3"},
		{[]int{0, 2, 4, 5, 6, 9, 10}, "0,2,4–6,9,10"},
		{[]int{3, 3, 1, 2}, "1–3"},
		{nil, ""},
	} {
		if got := GPURange(tc.in); got != tc.want {
			t.Errorf("GPURange(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestGPUTexts pins the words of every GPU telemetry push, firing and
// resolved: the GPUs as ranges, percentages, watts, degrees, durations.
func TestGPUTexts(t *testing.T) {
	t0 := time.Date(2026, 4, 24, 0, 41, 41, 0, time.UTC)
	dev := func(i int, change func(d *gpu.Device)) gpu.Device {
		d := gpu.Device{Index: i, BusID: []string{"0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00", "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00"}[i],
			Supported:   gpu.FieldUtilization | gpu.FieldPower | gpu.FieldPowerLimit | gpu.FieldTemperature | gpu.FieldClockEvents | gpu.FieldECC | gpu.FieldRemappedRows,
			PowerLimitW: 700}
		if change != nil {
			change(&d)
		}
		return d
	}
	hungGPUs := func(idx ...int) []gpu.Device {
		var out []gpu.Device
		for _, i := range idx {
			out = append(out, dev(i, func(d *gpu.Device) { d.SMUtil, d.PowerW = uint32(100-i%2), 66+float64(i)*0.9 }))
		}
		return out
	}
	alert := func(rule watchdog.RuleName, status watchdog.Status, lasted time.Duration, phase string, f watchdog.GPUFacts) watchdog.Alert {
		return watchdog.Alert{Rule: rule, Status: status, Began: t0, At: t0.Add(lasted), Phase: phase, GPU: f}
	}
	stuckAlert := func(a watchdog.Alert) watchdog.Alert { a.Incident = watchdog.GPUStuckIncident; return a }
	thermal := func(i int, temp uint32) gpu.Device {
		return dev(i, func(d *gpu.Device) {
			d.ClockEventReasons, d.TempC = gpu.ReasonHWThermalSlowdown|gpu.ReasonHWSlowdown|gpu.ReasonSWPowerCap, temp
		})
	}
	brake := dev(7, func(d *gpu.Device) { d.ClockEventReasons = gpu.ReasonHWPowerBrakeSlowdown | gpu.ReasonHWSlowdown })
	plain := dev(4, func(d *gpu.Device) { d.ClockEventReasons = gpu.ReasonHWSlowdown; d.TempC = 40 })
	for _, tc := range []struct {
		name          string
		a             watchdog.Alert
		body, subject string
	}{
		{"hang on eight GPUs", alert(watchdog.RuleGPUHang, watchdog.Firing, 5*time.Minute+3*time.Second, "Pretrain 1/3", watchdog.GPUFacts{Devices: hungGPUs(0, 1, 2, 3, 4, 5, 6, 7)}),
			`phase "Pretrain 1/3": GPUs 0–7 busy at 99% but drawing 72 W for 5m with no new step — likely a hung NCCL collective`, "gpu-hang Pretrain 1/3"},
		{"hang on a gap of GPUs, no steps", alert(watchdog.RuleGPUHang, watchdog.Firing, 7*time.Minute, "torchrun", watchdog.GPUFacts{Devices: hungGPUs(0, 1, 2, 3, 6), NoSteps: true}),
			`phase "torchrun": GPUs 0–3,6 busy at 99% but drawing 71 W for 7m (it reports no steps) — likely a hung NCCL collective`, "gpu-hang torchrun"},
		{"hang resolved", alert(watchdog.RuleGPUHang, watchdog.Resolved, 12*time.Minute, "Pretrain 1/3", watchdog.GPUFacts{Devices: hungGPUs(0, 1, 2, 3, 4, 5, 6, 7)}),
			`resolved: phase "Pretrain 1/3": GPUs 0–7 busy at little power after 12m`, "resolved gpu-hang Pretrain 1/3"},
		{"idle", alert(watchdog.RuleGPUIdle, watchdog.Firing, 10*time.Minute, "Pretrain 1/3", watchdog.GPUFacts{Devices: []gpu.Device{dev(0, nil), dev(1, func(d *gpu.Device) { d.SMUtil = 3 })}}),
			`phase "Pretrain 1/3": GPUs 0,1 idle (at most 3% busy) for 10m with no new step — consider intervening`, "gpu-idle Pretrain 1/3"},
		{"idle one GPU, no steps", alert(watchdog.RuleGPUIdle, watchdog.Firing, 14*time.Minute, "job", watchdog.GPUFacts{Devices: []gpu.Device{dev(5, nil)}, NoSteps: true}),
			`phase "job": GPU 5 idle (at most 0% busy) for 14m (it reports no steps) — consider intervening`, "gpu-idle job"},
		{"idle resolved", alert(watchdog.RuleGPUIdle, watchdog.Resolved, 15*time.Minute, "Pretrain 1/3", watchdog.GPUFacts{Devices: hungGPUs(0, 1, 2, 3, 4, 5, 6, 7)}),
			`resolved: phase "Pretrain 1/3": GPUs 0–7 idle after 15m`, "resolved gpu-idle Pretrain 1/3"},
		{"lost", alert(watchdog.RuleGPULost, watchdog.Firing, 0, "Pretrain 1/3", watchdog.GPUFacts{Devices: []gpu.Device{{Index: 5, BusID: "0000:ab:00", Lost: true}}}),
			`GPU 5 (0000:ab:00) lost: fallen off the bus — reboot the host; phase "Pretrain 1/3" was using it`, "gpu-lost 5"},
		{"lost, no phase", alert(watchdog.RuleGPULost, watchdog.Firing, 0, "", watchdog.GPUFacts{Devices: []gpu.Device{{Index: 0, BusID: "0000:18:00", Lost: true}}}),
			`GPU 0 (0000:18:00) lost: fallen off the bus — reboot the host`, "gpu-lost 0"},
		{"lost resolved", alert(watchdog.RuleGPULost, watchdog.Resolved, 2*time.Hour+5*time.Minute, "Pretrain 1/3", watchdog.GPUFacts{Devices: []gpu.Device{{Index: 5, BusID: "0000:ab:00", Lost: true}}}),
			`resolved: GPU 5 (0000:ab:00) lost after 2h5m`, "resolved gpu-lost 5"},
		{"NVML stuck", stuckAlert(alert(watchdog.RuleGPULost, watchdog.Firing, 0, "", watchdog.GPUFacts{Stuck: time.Minute + 3*time.Second})),
			`NVML has not answered for 1m: a GPU or the driver is stuck — look for an Xid in the kernel log (79: a GPU fell off the bus); the GPU readings and rules wait for it`, "gpu-lost nvml"},
		{"NVML stuck resolved", stuckAlert(alert(watchdog.RuleGPULost, watchdog.Resolved, 6*time.Minute, "", watchdog.GPUFacts{Stuck: time.Minute})),
			`resolved: NVML stopped answering after 6m`, "resolved gpu-lost nvml"},
		{"remap pending", alert(watchdog.RuleGPURemap, watchdog.Firing, 0, "Pretrain 1/3", watchdog.GPUFacts{Devices: []gpu.Device{dev(2, func(d *gpu.Device) {
			d.RemappedRows = gpu.RemappedRows{Correctable: 3, Uncorrectable: 1, Pending: true}
		})}}),
			`GPU 2 (0000:3a:00): a memory row remap waits for a GPU reset (1 row remapped for uncorrectable errors) — reset the GPU (nvidia-smi -r) when the run allows; phase "Pretrain 1/3" was using it`, "gpu-remap 2 pending"},
		{"remap failed", alert(watchdog.RuleGPURemap, watchdog.Firing, 0, "", watchdog.GPUFacts{Devices: []gpu.Device{dev(6, func(d *gpu.Device) {
			d.RemappedRows = gpu.RemappedRows{Uncorrectable: 512, Failed: true}
		})}}),
			`GPU 6 (0000:ba:00): a memory row remap failed (512 rows remapped for uncorrectable errors) — replace the GPU`, "gpu-remap 6 failed"},
		{"remap resolved", alert(watchdog.RuleGPURemap, watchdog.Resolved, 40*time.Minute, "", watchdog.GPUFacts{Devices: []gpu.Device{dev(2, func(d *gpu.Device) {
			d.RemappedRows = gpu.RemappedRows{Pending: true}
		})}}),
			`resolved: GPU 2 (0000:3a:00): row remap pending after 40m`, "resolved gpu-remap 2 pending"},
		{"ecc", alert(watchdog.RuleGPUECC, watchdog.Firing, 0, "Pretrain 1/3", watchdog.GPUFacts{NewECC: 2, Devices: []gpu.Device{dev(4, func(d *gpu.Device) { d.ECCVolatileUncorrected = 4 })}}),
			`GPU 4 (0000:9a:00): 2 new uncorrectable ECC errors (4 since the driver loaded) — its processes may have read bad memory; reset the GPU (nvidia-smi -r) when it is free; phase "Pretrain 1/3" was using it`, "gpu-ecc 4 +2"},
		{"ecc, one", alert(watchdog.RuleGPUECC, watchdog.Firing, 0, "", watchdog.GPUFacts{NewECC: 1, Devices: []gpu.Device{dev(1, func(d *gpu.Device) { d.ECCVolatileUncorrected = 1 })}}),
			`GPU 1 (0000:2a:00): 1 new uncorrectable ECC error (1 since the driver loaded) — its processes may have read bad memory; reset the GPU (nvidia-smi -r) when it is free`, "gpu-ecc 1 +1"},
		{"ecc resolved", alert(watchdog.RuleGPUECC, watchdog.Resolved, 11*time.Minute, "Pretrain 1/3", watchdog.GPUFacts{NewECC: 3, Devices: []gpu.Device{dev(4, func(d *gpu.Device) { d.ECCVolatileUncorrected = 5 })}}),
			`resolved: GPU 4 (0000:9a:00): 3 new uncorrectable ECC errors, none since after 11m`, "resolved gpu-ecc 4 +3"},
		{"thermal slowdown", alert(watchdog.RuleGPUSlowdown, watchdog.Firing, 3*time.Minute, "Pretrain 1/3", watchdog.GPUFacts{Devices: []gpu.Device{thermal(0, 91), thermal(1, 92), thermal(2, 90), thermal(3, 89)}}),
			`GPUs 0–3 slowed by the hardware for 3m (thermal, up to 92 °C) — check the cooling; phase "Pretrain 1/3" was using them`, "gpu-slowdown 0–3"},
		{"power brake", alert(watchdog.RuleGPUSlowdown, watchdog.Firing, 4*time.Minute, "", watchdog.GPUFacts{Devices: []gpu.Device{brake}}),
			`GPU 7 slowed by the hardware for 4m (power brake) — check the power supply`, "gpu-slowdown 7"},
		{"thermal and power brake", alert(watchdog.RuleGPUSlowdown, watchdog.Firing, 3*time.Minute, "", watchdog.GPUFacts{Devices: []gpu.Device{thermal(3, 88), brake}}),
			`GPUs 3,7 slowed by the hardware for 3m (thermal, up to 88 °C; power brake) — check the cooling and the power supply`, "gpu-slowdown 3,7"},
		{"slowdown without a reason", alert(watchdog.RuleGPUSlowdown, watchdog.Firing, 3*time.Minute, "Finetune", watchdog.GPUFacts{Devices: []gpu.Device{plain}}),
			`GPU 4 slowed by the hardware for 3m (HW slowdown) — check the cooling and the power supply; phase "Finetune" was using it`, "gpu-slowdown 4"},
		{"slowdown resolved", alert(watchdog.RuleGPUSlowdown, watchdog.Resolved, 11*time.Minute, "Pretrain 1/3", watchdog.GPUFacts{Devices: []gpu.Device{thermal(0, 91), thermal(1, 92)}}),
			`resolved: GPUs 0,1 slowed by the hardware after 11m`, "resolved gpu-slowdown 0,1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Alert(tc.a)
			if got.Body != tc.body || got.Subject != tc.subject {
				t.Errorf("got  %q / %q\nwant %q / %q", got.Body, got.Subject, tc.body, tc.subject)
			}
		})
	}
}
