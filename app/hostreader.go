package app

import (
	"context"

	"lavender/exporter"
	"lavender/phaseserver"
	"lavender/watchdog"
)

// hostReader reads the host for the watchdog: swap, pressure and OOM kills
// from procfs, the victim from the kernel log, the phases from the
// phase server's table.
func hostReader(procfs string, klog *kernelLog, exp *phaseserver.Server) watchdog.Reader {
	var judged victimJudge
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
		_, phases := exp.Snapshot()
		s.Phases = phases
		s.Ends = exp.Ends()
		return s, nil
	}
}

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
