package app

import (
	"context"

	"github.com/lavender-ml/lavender/exporter"
	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/phaseserver"
	"github.com/lavender-ml/lavender/proctree"
	"github.com/lavender-ml/lavender/watchdog"
)

// hostReader reads the host for the watchdog: swap, pressure and OOM kills
// from procfs, the victim from the kernel log, the phases from the
// phase server's table, and the GPUs, with the phases they serve.
func hostReader(procfs string, klog *kernelLog, exp *phaseserver.Server, gpus *gpus) watchdog.Reader {
	var judged victimJudge
	onGPU := phaseGPUs(procfs)
	return func(ctx context.Context) (watchdog.Sample, error) {
		h, err := exporter.ReadHost(ctx, procfs)
		if err != nil {
			return watchdog.Sample{}, err
		}
		s := watchdog.Sample{
			Swap:     watchdog.Swap{UsedBytes: h.Swap.UsedBytes, TotalBytes: h.Swap.TotalBytes, Ratio: h.Swap.UsedRatio},
			Pressure: watchdog.Pressure{Available: h.Pressure.Available, Some: h.Pressure.SomeAvg10, Full: h.Pressure.FullAvg10},
			OOM:      watchdog.OOM{Available: h.HaveOOMKills, Kills: h.OOMKills},
		}
		v := klog.victim()
		s.OOM.Victim = judged.of(watchdog.Victim{PID: v.PID, Name: v.Name, Seq: v.Seq}, exp)
		// A phase whose process died without an end ends now, failed, so
		// this very poll pushes it.
		exp.CheckProcesses()
		run, phases := exp.Snapshot()
		s.Phases = phases
		if run != nil {
			s.Run = *run
		}
		s.Ends = exp.Ends()
		if gpus != nil {
			s.GPUs, s.GPUErr = gpus.read()
			if len(s.GPUs) > 0 {
				s.PhaseGPUs = onGPU(s.Phases, s.GPUs)
			}
		}
		return s, nil
	}
}

// phaseGPUs maps the running phases to their GPUs by the processes NVML
// lists, walking each up procfs's parents to a phase's pid. NVML names
// processes in the host's first pid namespace, so only a phase whose pid
// was taken there, on this boot, can be matched; elsewhere (lavender or
// the phase in a container of its own) the map stays empty and the rules
// that need it stay silent rather than guess.
func phaseGPUs(procfs string) func([]phaseapi.Phase, []gpu.Device) map[string][]int {
	host, err := proctree.ReadHost(procfs)
	judged := func(p phaseapi.Process) bool {
		return err == nil && host.Known() && host.PIDNS == initialPIDNamespace && p.BootID == host.BootID && p.PIDNS == host.PIDNS
	}
	parent := func(pid int) int {
		st, err := proctree.ReadStat(procfs, pid)
		if err != nil {
			return 0
		}
		return st.PPID
	}
	return func(phases []phaseapi.Phase, devices []gpu.Device) map[string][]int {
		return watchdog.PhaseGPUs(phases, devices, judged, parent)
	}
}

// initialPIDNamespace is the Linux kernel's first pid namespace (its inode
// is fixed, PROC_PID_INIT_INO), the one NVML's process ids are in.
const initialPIDNamespace = "pid:[4026531836]"

// victimJudge says whose process an OOM victim was, once per kernel log
// record: at the first poll that sees it, the closest to the kill.
type victimJudge struct{ last watchdog.Victim }

func (j *victimJudge) of(v watchdog.Victim, exp *phaseserver.Server) watchdog.Victim {
	if !v.Known() {
		return v
	}
	if v.Same(j.last) {
		return j.last
	}
	phase, owner := exp.OwnerOf(v.PID, v.Name)
	switch owner {
	case phaseserver.OwnerPhase:
		v.Owner, v.Phase = watchdog.VictimOfPhase, phase
	case phaseserver.OwnerNone:
		v.Owner = watchdog.VictimOfNoPhase
	}
	j.last = v
	return v
}
