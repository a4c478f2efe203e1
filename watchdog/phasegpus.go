package watchdog

import (
	"slices"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/phaseapi"
)

// maxAncestry bounds one walk up the process tree: a real one is a few
// tens deep, and a parent function that loops must not hang the poll.
const maxAncestry = 1024

// PhaseGPUs maps each active phase to the GPUs its process, or a
// descendant of it, runs on: the indexes of the devices whose Pids hold
// such a process, ascending, each once. It is Sample.PhaseGPUs.
//
// Only active phases with a pid that judged accepts are candidates
// (judged nil accepts every pid): the caller says which pids mean the
// same processes as NVML's, since NVML names processes in the host's pid
// namespace and a phase's pid is in its sender's. parent gives a
// process's parent pid, 0 for none or unknown; each pid of the GPUs is
// walked up through it once, so the caller can read procfs lazily. A GPU
// pid that leads to no phase's process (another user's job, a monitor)
// is no phase's. A phase on no GPU is absent from the map, which is nil
// when no phase is on any.
//
// Where two phases' processes are one another's ancestors (a phase
// started from inside another), a GPU process belongs to the nearest:
// the phase whose process it descends from most closely.
func PhaseGPUs(phases []phaseapi.Phase, devices []gpu.Device, judged func(phaseapi.Process) bool, parent func(pid int) int) map[string][]int {
	byPID := map[int]string{}
	for _, p := range phases {
		if !p.Active() || p.PID <= 0 || (judged != nil && !judged(p.Process)) {
			continue
		}
		// Two phases naming one pid: the first listed keeps it, so the
		// answer does not depend on map order.
		if _, dup := byPID[int(p.PID)]; !dup {
			byPID[int(p.PID)] = p.Name
		}
	}
	if len(byPID) == 0 {
		return nil
	}
	owner := map[int]string{} // pid → its phase ("" for none), walked once per call
	phaseOf := func(pid int) string {
		var path []int
		name := ""
		for depth := 0; pid > 0 && depth < maxAncestry; depth++ {
			if n, ok := owner[pid]; ok {
				name = n
				break
			}
			if n, ok := byPID[pid]; ok {
				name = n
				break
			}
			path = append(path, pid)
			pid = parent(pid)
		}
		for _, p := range path {
			owner[p] = name
		}
		return name
	}
	var out map[string][]int
	for _, d := range devices {
		for _, pid := range d.Pids {
			name := phaseOf(int(pid))
			if name == "" || slices.Contains(out[name], d.Index) {
				continue
			}
			if out == nil {
				out = map[string][]int{}
			}
			out[name] = append(out[name], d.Index)
		}
	}
	for _, idx := range out {
		slices.Sort(idx)
	}
	return out
}

// gpuPhase inverts a sample's PhaseGPUs: the phase each GPU serves, by
// index; of two phases on one GPU, the first by name, so the answer is
// stable from poll to poll.
func gpuPhase(s Sample) map[int]string {
	var out map[int]string
	for name, idx := range s.PhaseGPUs {
		for _, i := range idx {
			if out == nil {
				out = map[int]string{}
			}
			if cur, ok := out[i]; !ok || name < cur {
				out[i] = name
			}
		}
	}
	return out
}
