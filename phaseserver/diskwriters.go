package phaseserver

import "github.com/lavender-ml/lavender/diskguard"

// DiskWriters are the phases as the disk guard watches them: their
// directories, whether they ended (then their directories are released),
// when they started (the newest running ones come first under the guard's
// cap) and their newest save, from the published table, so that the guard
// takes no lock of the server's.
func (s *Server) DiskWriters() []diskguard.Writer {
	_, phases := s.Snapshot()
	ws := make([]diskguard.Writer, 0, len(phases))
	for _, p := range phases {
		w := diskguard.Writer{Name: p.Name, Dirs: p.Dirs, Ended: !p.Active(), Started: p.Started}
		if n := len(p.Saves); n > 0 {
			w.SavedAt, w.SaveBytes = p.Saves[n-1].At, p.Saves[n-1].Bytes
		}
		ws = append(ws, w)
	}
	return ws
}
