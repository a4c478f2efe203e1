package watchdog

import (
	"reflect"
	"testing"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/phaseapi"
)

// TestPhaseGPUs: each active phase gets the GPUs its process or a
// descendant of it runs on, whatever else shares the GPUs.
func TestPhaseGPUs(t *testing.T) {
	// The process tree: torchrun (100) under a shell (10) starts eight
	// ranks (101–108); a second phase's process (200) starts 201; 300 is
	// another user's job; 900 is a loop (its own grandparent).
	parents := map[int]int{
		10: 1, 100: 10, 101: 100, 102: 100, 103: 100, 104: 100, 105: 100, 106: 100, 107: 100, 108: 100,
		200: 1, 201: 200, 202: 201, 300: 1, 900: 901, 901: 900,
		// A phase started from inside another: 150 is a phase's own
		// process, under 100's.
		150: 100, 151: 150,
	}
	parent := func(pid int) int { return parents[pid] }
	active := func(name string, pid int64) phaseapi.Phase {
		p := phaseapi.Phase{Name: name, Status: phaseapi.StatusActive}
		p.PID, p.BootID, p.PIDNS = pid, "boot", "pid:[4026531836]"
		return p
	}
	ended := active("Eval", 200)
	ended.Status = phaseapi.StatusOK
	elsewhere := active("Other box", 200)
	elsewhere.BootID = "another boot"
	eight := func(pid func(i int) []uint32) []gpu.Device {
		var d []gpu.Device
		for i := range 8 {
			d = append(d, gpu.Device{Index: i, Pids: pid(i)})
		}
		return d
	}
	ranks := eight(func(i int) []uint32 { return []uint32{uint32(101 + i)} })
	sameHost := func(p phaseapi.Process) bool { return p.BootID == "boot" }
	for _, tc := range []struct {
		name    string
		phases  []phaseapi.Phase
		devices []gpu.Device
		judged  func(phaseapi.Process) bool
		want    map[string][]int
	}{
		{"eight ranks of one phase", []phaseapi.Phase{active("Pretrain 1/3", 100)}, ranks, nil,
			map[string][]int{"Pretrain 1/3": {0, 1, 2, 3, 4, 5, 6, 7}}},
		{"the phase's own process on the GPU", []phaseapi.Phase{active("Single", 101)}, ranks, nil,
			map[string][]int{"Single": {0}}},
		{"two phases, another user's job beside them", []phaseapi.Phase{active("A", 100), active("B", 200)},
			[]gpu.Device{{Index: 0, Pids: []uint32{101, 300}}, {Index: 1, Pids: []uint32{202}}, {Index: 2, Pids: []uint32{300}}, {Index: 3, Pids: []uint32{102, 201}}},
			nil, map[string][]int{"A": {0, 3}, "B": {1, 3}}},
		{"a GPU listed once though two ranks share it", []phaseapi.Phase{active("A", 100)},
			[]gpu.Device{{Index: 5, Pids: []uint32{101, 102, 103}}, {Index: 2, Pids: []uint32{104}}}, nil, map[string][]int{"A": {2, 5}}},
		{"the nearest phase owns a nested phase's process", []phaseapi.Phase{active("Outer", 100), active("Inner", 150)},
			[]gpu.Device{{Index: 0, Pids: []uint32{151}}, {Index: 1, Pids: []uint32{101}}}, nil, map[string][]int{"Inner": {0}, "Outer": {1}}},
		{"an ended phase owns nothing", []phaseapi.Phase{ended}, []gpu.Device{{Index: 0, Pids: []uint32{201}}}, nil, nil},
		{"a phase without a pid owns nothing", []phaseapi.Phase{{Name: "wrapped", Status: phaseapi.StatusActive}}, ranks, nil, nil},
		{"a pid the caller cannot judge here owns nothing", []phaseapi.Phase{elsewhere}, []gpu.Device{{Index: 0, Pids: []uint32{201}}}, sameHost, nil},
		{"a loop in the tree ends the walk", []phaseapi.Phase{active("A", 100)}, []gpu.Device{{Index: 0, Pids: []uint32{900}}}, nil, nil},
		{"no process lists (not permitted)", []phaseapi.Phase{active("A", 100)}, eight(func(int) []uint32 { return nil }), nil, nil},
		{"a lost GPU has no processes", []phaseapi.Phase{active("A", 100)}, []gpu.Device{{Index: 0, Lost: true}, {Index: 1, Pids: []uint32{102}}}, nil,
			map[string][]int{"A": {1}}},
		{"no GPUs", []phaseapi.Phase{active("A", 100)}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			walks := 0
			counting := func(pid int) int { walks++; return parent(pid) }
			got := PhaseGPUs(tc.phases, tc.devices, tc.judged, counting)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PhaseGPUs = %v, want %v", got, tc.want)
			}
			if walks > len(parents)+maxAncestry {
				t.Errorf("%d parent lookups for %d processes", walks, len(parents))
			}
		})
	}
}

// TestPhaseGPUsWalksEachProcessOnce: a rank on eight GPUs, or eight ranks
// under one launcher, costs one lookup per process, not one per GPU.
func TestPhaseGPUsWalksEachProcessOnce(t *testing.T) {
	parents := map[int]int{100: 1}
	var devices []gpu.Device
	for i := range 8 {
		parents[101+i] = 100
		devices = append(devices, gpu.Device{Index: i, Pids: []uint32{uint32(101 + i), 300}})
	}
	asked := map[int]int{}
	parent := func(pid int) int { asked[pid]++; return parents[pid] }
	p := phaseapi.Phase{Name: "A", Status: phaseapi.StatusActive}
	p.PID = 100
	PhaseGPUs([]phaseapi.Phase{p}, devices, nil, parent)
	for pid, n := range asked {
		if n > 1 {
			t.Errorf("parent(%d) asked %d times", pid, n)
		}
	}
	if len(asked) != 9 { // the eight ranks and the stranger, whose parent is unknown
		t.Errorf("asked %v", asked)
	}
}
