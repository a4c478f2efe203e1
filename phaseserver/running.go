package phaseserver

import "time"

// RunningPhase names the active phase that started last; ok is false when
// none is active. A kernel fault whose record names no process is laid on
// it.
func (s *Server) RunningPhase() (name string, ok bool) {
	_, phases := s.Snapshot()
	var started time.Time
	for _, p := range phases {
		if p.Active() && (!ok || p.Started.After(started)) {
			name, started, ok = p.Name, p.Started, true
		}
	}
	return name, ok
}
