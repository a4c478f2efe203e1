package phaseserver

import (
	"time"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/proctree"
)

// faultWindow is how soon after a fault of the kernel log that hit a phase
// (an Xid on the GPU its process used, its disk gone read-only) a failed
// end of the phase counts as dying of it: the fault becomes the phase's
// reason, unless the end gave a specific one.
const faultWindow = 2 * time.Minute

// phaseFault is the newest fault that hit a phase.
type phaseFault struct {
	reason string
	at     time.Time
}

// maxPhaseFaults bounds the faults kept: one per phase name, the oldest
// forgotten first.
const maxPhaseFaults = 64

// genericReason matches the reasons that say how a process ended, not why:
// the fault that killed it says more.
var genericReason = lazyregexp.New(`(?i)^(died without ending|exit(ed)?( with)? (status|code)|signal |killed|terminated|SIG[A-Z]+$|$)`)

// NoteFault records that a fault of the kernel log hit phase at at, in the
// words of reason ("GPU 0000:3b:00 Xid 79: fallen off the bus"). A failed
// end of the phase within faultWindow takes it as its reason, unless the
// end names a specific one.
func (s *Server) NoteFault(phase, reason string, at time.Time) {
	if phase == "" || reason == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults == nil {
		s.faults = map[string]phaseFault{}
	}
	if _, ok := s.faults[phase]; !ok && len(s.faults) >= maxPhaseFaults {
		oldest := ""
		for name, f := range s.faults {
			if oldest == "" || f.at.Before(s.faults[oldest].at) {
				oldest = name
			}
		}
		delete(s.faults, oldest)
	}
	s.faults[phase] = phaseFault{reason: reason, at: at}
}

// failedReasonLocked is the reason a failed end of phase name at now
// records: the fault that hit it within faultWindow, unless reason is
// specific.
func (s *Server) failedReasonLocked(name, reason string, now time.Time) string {
	f, ok := s.faults[name]
	if !ok || now.Sub(f.at) > faultWindow || f.at.Sub(now) > time.Second {
		return reason
	}
	return withFault(f.reason, reason)
}

// gpuError matches a reason that is the GPU's failure as the training code
// saw it ("RuntimeError: CUDA error: unspecified launch failure"): the
// fault says why, the reason what the code saw.
var gpuError = lazyregexp.New(`(?i)\b(cuda|nccl|cublas|cudnn|gpu)\b`)

// withFault is the reason of a failed end after fault: the fault when the
// reason only says how the process ended, the fault and then the reason
// when the reason is the GPU's failure as the code saw it, else the
// reason.
func withFault(fault, reason string) string {
	switch {
	case genericReason.MatchString(reason):
		return fault
	case gpuError.MatchString(reason):
		return phaseapi.CleanReason(fault + " (" + reason + ")")
	}
	return reason
}

// PhaseOfPID names the running phase whose process is pid or an ancestor
// of it, read from procfs now; ok is false when pid is no phase's. Only
// phases whose pid this server may judge (started on this host and pid
// namespace) are candidates.
func (s *Server) PhaseOfPID(pid int) (name string, ok bool) {
	if pid <= 0 {
		return "", false
	}
	s.mu.Lock()
	pids, names, _ := s.phaseProcessesLocked(s.clock(), 0)
	s.mu.Unlock()
	if len(pids) == 0 {
		return "", false
	}
	if anc, ok := proctree.AncestorAmong(s.procfs, pid, pids); ok {
		return names[anc], true
	}
	return "", false
}
