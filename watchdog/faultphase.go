package watchdog

import "github.com/lavender-ml/lavender/kmsg"

// PhasesOfFaults gives each GPU and storage fault of the kernel log the
// phase it hit: the phase whose process (or a descendant of it) the record
// names, asked of phaseOfPID once per pid, or for a record that names no
// process the phase running then ("" for none). OOM kills are left out:
// the OOM rule names kills, from the kill counter.
func PhasesOfFaults(faults []kmsg.Fault, phaseOfPID func(pid int) (string, bool), running string) []KernelFault {
	byPID := map[int]string{} // one ancestry walk per pid and batch
	var out []KernelFault
	for _, f := range faults {
		if f.Kind == kmsg.OOMKill {
			continue
		}
		kf := KernelFault{Fault: f}
		if f.PID > 0 {
			name, seen := byPID[f.PID]
			if !seen {
				name, _ = phaseOfPID(f.PID)
				byPID[f.PID] = name
			}
			kf.Phase, kf.ByPID = name, name != ""
		} else {
			kf.Phase = running
		}
		out = append(out, kf)
	}
	return out
}

// EndsPhase reports whether the fault can end the phase it hit, so that a
// failed end soon after names it as the reason: a GPU fault whose action
// is more than "ignore" when its process is the phase's, a GPU lost or
// needing a reset or reboot, a disk that can no longer be written.
func (f KernelFault) EndsPhase() bool {
	if f.Phase == "" {
		return false
	}
	if f.Kind == kmsg.Storage {
		switch f.Storage {
		case kmsg.ReadOnly, kmsg.Shutdown, kmsg.NVMeDown:
			return true
		}
		return false
	}
	action, _ := kmsg.ActionOf(f.Fault)
	switch {
	case f.ByPID:
		return action != kmsg.Ignore
	case f.FallenOff():
		return true
	}
	return action == kmsg.ResetGPU || action == kmsg.RestartBM
}
