package phaseserver

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/proctree"
)

// applyWork records what a heartbeat reports beside its steps: the process
// (a start's, or a ping's while the phase has none: a start resets the
// phase, a start that joins it does not), its directories (added
// to those known, the newest kept), a checkpoint save, the loss and the
// evaluation's progress, and work between steps seen moving (busy). Slices and pointers are replaced, never written
// through, since the published views share them.
func applyWork(p *phaseapi.Phase, req phaseapi.HeartbeatRequest, now time.Time) {
	if req.PID != nil && p.PID == 0 {
		p.Process = phaseapi.Process{PID: *req.PID, BootID: strings.TrimSpace(req.BootID), PIDNS: strings.TrimSpace(req.PIDNS)}
	}
	if len(req.Dirs) > 0 {
		p.Dirs = mergeDirs(p.Dirs, phaseapi.CleanDirs(req.Dirs))
	}
	if req.SaveBytes != nil {
		b := *req.SaveBytes
		p.SaveBytes = &b
		saves := append(slices.Clone(p.Saves), phaseapi.Save{Bytes: b, At: now})
		p.Saves = saves[max(len(saves)-phaseapi.MaxSaves, 0):]
	}
	if req.Loss != nil {
		l := *req.Loss
		p.Loss = &l
	}
	if req.Busy != "" {
		p.Busy, p.BusyAt = req.Busy, now
	}
	if req.EvalStep != nil {
		s := *req.EvalStep
		if p.EvalStep == nil || *p.EvalStep != s {
			p.EvalProgressAt = now
		}
		p.EvalStep = &s
		switch {
		case req.EvalTotal != nil:
			p.EvalTotal = *req.EvalTotal
		case s > p.EvalTotal:
			p.EvalTotal = 0 // another loop, of a size not told
		}
	}
}

// mergeDirs adds fresh to known, in order, without repeats; over
// phaseapi.MaxDirs the oldest go.
func mergeDirs(known, fresh []string) []string {
	out := slices.Clone(known)
	for _, d := range fresh {
		if i := slices.Index(out, d); i >= 0 {
			out = slices.Delete(out, i, i+1)
		}
		out = append(out, d)
	}
	return out[max(len(out)-phaseapi.MaxDirs, 0):]
}

// judgeable reports whether the pid a process of a heartbeat names is one
// this server may judge: it comes from this boot and this pid namespace.
func (s *Server) judgeable(p phaseapi.Process) bool {
	return p.PID > 0 && s.host.Known() && p.BootID == s.host.BootID && p.PIDNS == s.host.PIDNS
}

// joinsLocked reports whether a start joins the running phase i instead of
// restarting it: the start's process is that phase's process or descends
// from it (a script run by `lavender phase run` that announces itself),
// both on this host.
func (s *Server) joinsLocked(i int, req phaseapi.HeartbeatRequest) bool {
	if i < 0 || req.Event != phaseapi.EventStart || req.PID == nil || !s.table.phases[i].Active() {
		return false
	}
	running := s.table.phases[i].Process
	start := phaseapi.Process{PID: *req.PID, BootID: strings.TrimSpace(req.BootID), PIDNS: strings.TrimSpace(req.PIDNS)}
	if !s.judgeable(running) || !s.judgeable(start) {
		return false
	}
	_, ok := proctree.AncestorAmong(s.procfs, int(start.PID), []int{int(running.PID)})
	return ok
}

// checkSavedWork checks what a saved table says beside the steps, by the
// rules a heartbeat is held to.
func checkSavedWork(p phaseapi.Phase) error {
	switch {
	case p.PID < 0 || p.PID > phaseapi.MaxPID:
		return fmt.Errorf("pid %d", p.PID)
	case len(p.Dirs) > phaseapi.MaxDirs:
		return fmt.Errorf("%d dirs, more than %d", len(p.Dirs), phaseapi.MaxDirs)
	case len(p.Saves) > phaseapi.MaxSaves:
		return fmt.Errorf("%d saves, more than %d", len(p.Saves), phaseapi.MaxSaves)
	case p.EvalStep != nil && p.EvalTotal > 0 && *p.EvalStep > p.EvalTotal:
		return fmt.Errorf("eval step %d past the eval total of %d", *p.EvalStep, p.EvalTotal)
	}
	return phaseapi.HeartbeatRequest{Event: phaseapi.EventPing, Dirs: p.Dirs}.Check()
}
