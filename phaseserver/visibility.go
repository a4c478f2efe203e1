package phaseserver

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/proctree"
)

var procHidesDesc = prometheus.NewDesc("lavender_proc_hides_processes",
	"1 when procfs hides other users' processes from lavender (mounted with hidepid=, as systemd's ProtectProc= mounts it) or a running phase's process exists but procfs does not show it: such a phase is never ended as died without an end, though its silence still counts as a stall; 0 when lavender sees every process it judges.",
	nil, nil)

// procVisibility is what the server knows of procfs hiding processes.
// Scrapes and the status page read it without the phase table's lock.
type procVisibility struct {
	// mount is the procfs mount's hidepid= options, read once in New.
	mount proctree.Visibility
	// unseen counts the running phases whose process exists but procfs
	// does not show, at the last check.
	unseen atomic.Int64
	// warned is set once the hiding has been logged, which happens once;
	// the phase table's lock guards it.
	warned bool
}

// hides reports whether procfs hides processes that the server judges.
func (v *procVisibility) hides() bool { return v.mount.Hides || v.unseen.Load() > 0 }

// readProcVisibility reads how cfg's procfs shows other users' processes
// and warns once if it hides them. A procfs whose mount is not found (a
// fake one, a bind mount of a subdirectory) is taken as hiding nothing:
// a hidden pid is still caught, one at a time, by Judge.
func (s *Server) readProcVisibility() {
	v, err := proctree.ReadVisibility(s.procfs)
	if err != nil {
		s.logger.Debug("procfs mount options not read", "procfs", s.procfs, "err", err)
	}
	s.visibility.mount = v
	if v.Hides {
		s.visibility.warned = true
		s.logger.Warn("procfs hides other users' processes from lavender: a phase whose process it cannot see is never ended as died without an end (its silence is still a stall); run serve as the training user, as root, or in the mount's gid= group, or drop systemd's ProtectProc=invisible",
			"procfs", s.procfs, "mount", v.String())
	}
}

// warnUnseenLocked says, if nothing has yet, that a phase's process exists
// but is hidden.
func (s *Server) warnUnseenLocked(p phaseapi.Phase) {
	if s.visibility.warned {
		return
	}
	s.visibility.warned = true
	s.logger.Warn("a phase's process exists but procfs does not show it to lavender: it is not judged dead while it is hidden (its silence is still a stall); procfs hides other users' processes",
		"phase", p.Name, "pid", p.PID, "procfs", s.procfs)
}

// ProcVisibility says whether procfs hides processes that the server
// judges, and how, for the status page: hides is
// lavender_proc_hides_processes.
// It never waits on the phase table's lock.
func (s *Server) ProcVisibility() (hides bool, why string) {
	v := &s.visibility
	switch {
	case v.mount.Hides:
		return true, s.procfs + " is mounted with " + v.mount.String()
	case v.unseen.Load() > 0:
		return true, "a running phase's process exists but is not shown in " + s.procfs
	}
	return false, ""
}

// procVisibilityCollector publishes lavender_proc_hides_processes.
type procVisibilityCollector Server

func (c *procVisibilityCollector) Describe(ch chan<- *prometheus.Desc) { ch <- procHidesDesc }

func (c *procVisibilityCollector) Collect(ch chan<- prometheus.Metric) {
	v := 0.0
	if c.visibility.hides() {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(procHidesDesc, prometheus.GaugeValue, v)
}
