package phaseserver

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/proctree"
	"github.com/lavender-ml/lavender/runlog"
)

// maxEnds bounds the ends kept for the watchdog: it reads them every few
// seconds, and even a crash loop of every phase ends fewer in that time.
const maxEnds = 256

// recordEndLocked keeps the end of p for the watchdog.
func (s *Server) recordEndLocked(p phaseapi.Phase, died bool) {
	s.endSeq++
	s.ends = append(s.ends, phaseapi.PhaseEnd{
		Seq: s.endSeq, Phase: p.Name, Status: p.Status, Reason: p.Reason,
		Started: p.Started, Ended: p.Ended, Died: died, PID: p.PID,
		Outside: p.Status == phaseapi.StatusFailed && reasonStrength(p.Reason) == reasonOutside,
		Loss:    p.Loss,
	})
	if len(s.ends) > maxEnds {
		s.ends = slices.Delete(s.ends, 0, len(s.ends)-maxEnds)
	}
}

// restoreEndsLocked keeps an end for each ended phase of the table the
// last process saved, in the order they ended: an end it accepted and
// saved but was killed before its watchdog read (or while the push
// settled) is still news to a watchdog that saved how far it had read
// (watchdog.PhaseEndRule); one that saved nothing takes them as old news,
// as any end from before its first poll. A phase the server itself ended
// (its process gone) says so in its reason, as its end did.
func (s *Server) restoreEndsLocked() {
	var ended []phaseapi.Phase
	for _, p := range s.table.phases {
		if !p.Active() && !p.Ended.IsZero() {
			ended = append(ended, p)
		}
	}
	slices.SortStableFunc(ended, func(a, b phaseapi.Phase) int { return a.Ended.Compare(b.Ended) })
	for _, p := range ended {
		died := p.Status == phaseapi.StatusUnknown || strings.Contains(p.Reason, diedReasonPrefix+" (pid ")
		s.recordEndLocked(p, died)
	}
}

// diedReasonPrefix begins the reason of a phase the server ended because
// its process was gone.
const diedReasonPrefix = "died without ending"

// noteFailure counts the failed end p has just had and keeps it as its
// last failure, which a new start of the phase keeps.
func noteFailure(p *phaseapi.Phase) {
	p.Failures++
	p.LastFailure = &phaseapi.Failure{Started: p.Started, Ended: p.Ended, Reason: p.Reason}
}

// Ends returns the newest ends of phases, oldest first, at most maxEnds.
// It never waits on the phase table's lock.
func (s *Server) Ends() []phaseapi.PhaseEnd {
	if p := s.endsView.Load(); p != nil {
		return *p
	}
	return nil
}

// deadGrace is how long a phase's process must have been seen gone before
// the phase is ended for it: the wrapper reaps its child and then sends
// the end, with the true reason, a moment later.
const deadGrace = time.Second

// inheritedEndGrace is deadGrace for a phase this server took over from
// the saved table and has not seen alive: its process may have ended
// while the server was down (a restart), and the wrapper, which tries its
// end again at most 5 s apart while the exporter is away, sends it once
// the server is back. The grace covers that pause with room to spare.
const inheritedEndGrace = 15 * time.Second

// phaseRunKey names one run of one phase.
type phaseRunKey struct {
	name    string
	started int64
}

// CheckProcesses ends, as failed, every running phase whose process has
// died without an end: gone from procfs (or a zombie, or its pid now names
// a later process) at two checks deadGrace apart. Only pids of this boot
// and pid namespace are judged; one from another host or container never
// is, nor one that procfs hides (hidepid=: another user's process, which
// the kernel says exists): a pid serve cannot see is not a dead pid. A
// process is tied to its start time when first seen alive, so a reused pid
// is not taken for it. It also notes the phases' process trees for
// OwnerOf. serve calls it on every poll.
func (s *Server) CheckProcesses() {
	if !s.host.Known() {
		return
	}
	s.checkProcesses()
	s.traceLineage()
}

func (s *Server) checkProcesses() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	changed := false
	gone := make(map[phaseRunKey]time.Time, len(s.gone))
	var unseen int64
	defer func() { s.visibility.unseen.Store(unseen) }()
	for i := range s.table.phases {
		p := &s.table.phases[i]
		if !p.Active() || !s.judgeable(p.Process) {
			continue
		}
		key := phaseRunKey{p.Name, p.Started.UnixNano()}
		liveness, start, err := proctree.Judge(s.procfs, int(p.PID), p.PIDStartTicks)
		if err != nil {
			s.logger.Debug("phase process not judged", "phase", p.Name, "pid", p.PID, "err", err)
			continue
		}
		if liveness == proctree.Unseen {
			// Hidden from serve, yet the kernel says it exists: not a
			// death, and a sighting of it gone before no longer counts.
			unseen++
			s.warnUnseenLocked(*p)
			continue
		}
		alive := liveness == proctree.Living
		inherited := s.inherited[key]
		if alive && p.PIDStartTicks == 0 {
			if started, err := proctree.StartTime(s.procfs, start); err == nil && started.After(p.Started.Add(startSlack)) {
				// The pid names a process that started after the phase
				// did: the phase's own is gone and its pid reused.
				alive = false
			} else {
				p.PIDStartTicks, changed = start, true
			}
		}
		if alive {
			delete(s.inherited, key)
			continue
		}
		first, seen := s.gone[key]
		if !seen {
			gone[key] = now
			continue
		}
		grace := deadGrace
		if inherited {
			grace = inheritedEndGrace
		}
		if now.Sub(first) < grace {
			gone[key] = first
			continue
		}
		if inherited {
			s.endUnwatchedLocked(p, key)
			changed = true
			continue
		}
		p.Status, p.Ended = phaseapi.StatusFailed, now
		p.Reason = s.failedReasonLocked(p.Name, fmt.Sprintf("%s (pid %d gone)", diedReasonPrefix, p.PID), now)
		noteFailure(p)
		s.appendLog(endLine(*p, "died"))
		s.recordEndLocked(*p, true)
		s.logger.Warn("phase process died without ending; phase ended as failed", "phase", p.Name, "pid", p.PID)
		changed = true
	}
	s.gone = gone
	if changed {
		s.dirty = true
		s.saveLocked()
		s.publishLocked()
	}
}

// endUnwatchedLocked ends p, inherited from the saved table and gone at
// this server's first looks: its process ended while no lavender watched
// (serve down or restarting), and no end came after, so how it ended is
// not known; it is not said to have failed. Its end is put at its last
// heartbeat, the last time it was known to run.
func (s *Server) endUnwatchedLocked(p *phaseapi.Phase, key phaseRunKey) {
	delete(s.inherited, key)
	p.Status, p.Ended = phaseapi.StatusUnknown, p.LastHeartbeat
	if p.Ended.Before(p.Started) {
		p.Ended = p.Started
	}
	p.Reason = fmt.Sprintf("ended while lavender was down, its end never arrived (pid %d gone)", p.PID)
	s.appendLog(endLine(*p, "unknown"))
	s.recordEndLocked(*p, true)
	s.logger.Warn("phase process ended while lavender was down and no end came; phase ended, its outcome unknown", "phase", p.Name, "pid", p.PID)
}

// ownerWindow is how long after its end a phase's processes still count
// as its own for an OOM victim: the kill ends the process, and the phase
// often ends with it, before the poll that reads the kill.
const ownerWindow = 2 * time.Minute

// Owner says whose process a pid is, as OwnerOf judges it.
type Owner int

const (
	// OwnerUnknown: not judged (no victim, pids not judgeable here, or a
	// running phase whose process is unknown).
	OwnerUnknown Owner = iota
	// OwnerPhase: the process of a phase, or a descendant of it.
	OwnerPhase
	// OwnerNone: no phase's process: every running phase's process is
	// known and the pid is none of theirs.
	OwnerNone
)

// lineage is what the checks saw of the phases' process trees: every
// process that descended from a phase's process, by pid, kept for
// ownerWindow after it was last seen, so a process that has ended since (an
// OOM victim, reaped before the kill is read) can still be placed.
type lineage struct {
	phase string
	comm  string
	seen  time.Time
}

// phaseProcessesLocked lists the judgeable processes of the phases that
// run or, with a window, ended within it, and whether every running phase
// has one.
func (s *Server) phaseProcessesLocked(now time.Time, window time.Duration) (pids []int, phases map[int]string, all bool) {
	phases, all = map[int]string{}, true
	for _, p := range s.table.phases {
		recent := p.Active() || (window > 0 && now.Sub(p.Ended) <= window)
		switch {
		case !recent:
		case s.judgeable(p.Process):
			pids = append(pids, int(p.PID))
			phases[int(p.PID)] = p.Name
		case p.Active():
			all = false
		}
	}
	if s.visibility.hides() {
		// A hidden descendant cannot be traced to its phase: no pid can
		// be said to be no phase's.
		all = false
	}
	return pids, phases, all
}

// traceLineage records the process trees of the phases' processes. serve
// calls it with CheckProcesses on every poll; it reads procfs outside the
// table's lock, so heartbeats do not wait for it.
func (s *Server) traceLineage() {
	now := s.clock()
	s.mu.Lock()
	pids, phases, _ := s.phaseProcessesLocked(now, ownerWindow)
	s.mu.Unlock()
	var tree proctree.Tree
	if len(pids) > 0 {
		var err error
		if tree, err = proctree.Scan(s.procfs); err != nil {
			s.logger.Debug("process tree not read", "err", err)
		}
	}
	s.lineageMu.Lock()
	defer s.lineageMu.Unlock()
	for pid, l := range s.lineage {
		if now.Sub(l.seen) > ownerWindow {
			delete(s.lineage, pid)
		}
	}
	for pid, st := range tree {
		if root, ok := tree.AncestorAmong(pid, pids); ok {
			if s.lineage == nil {
				s.lineage = map[int]lineage{}
			}
			s.lineage[pid] = lineage{phase: phases[root], comm: st.Comm, seen: now}
		}
	}
}

// OwnerOf says whose process pid (named comm by the kernel) is: a phase's,
// when it is the process of a phase that runs or has just ended, or
// descends from it (judged now, or as the last check saw the trees, for a
// process that has ended since); no phase's, when every running phase's
// process is known and it is none of those; else unknown. Only pids of
// this host are judged.
func (s *Server) OwnerOf(pid int, comm string) (phase string, owner Owner) {
	if pid <= 0 || !s.host.Known() {
		return "", OwnerUnknown
	}
	s.mu.Lock()
	pids, phases, all := s.phaseProcessesLocked(s.clock(), ownerWindow)
	s.mu.Unlock()
	if root, ok := proctree.AncestorAmong(s.procfs, pid, pids); ok {
		return phases[root], OwnerPhase
	}
	s.lineageMu.Lock()
	l, ok := s.lineage[pid]
	s.lineageMu.Unlock()
	if ok && (comm == "" || l.comm == comm || strings.HasPrefix(comm, l.comm) || strings.HasPrefix(l.comm, comm)) {
		return l.phase, OwnerPhase
	}
	if !all {
		return "", OwnerUnknown
	}
	return "", OwnerNone
}

// startSlack allows for the clocks of a process's start and of the
// heartbeat it sent: a process that started this long after its phase's
// start cannot be the one that announced it.
const startSlack = 2 * time.Second

// refused counts a refused heartbeat by reason and logs it, at most once
// per reason per throttle interval.
func (s *Server) refused(reason string, err error) {
	s.refusedTotal.WithLabelValues(reason).Inc()
	r := s.refusedLogs[reason]
	if r == nil {
		r = s.refusedLogs[refusedOther]
	}
	if logIt, suppressed := r.Report(); logIt {
		s.logger.Warn("heartbeat refused", "reason", reason, "err", err, "suppressed_since_last_report", suppressed)
	}
}

// exceptionHead matches a reason that starts with an exception's class,
// perhaps after a rank: "RuntimeError: …", "rank 1: torch.OutOfMemoryError: …".
var exceptionHead = lazyregexp.New(`^((?:rank \d+: )?[A-Za-z_][\w.]*):\s`)

// shortReason is the head of a reason for the run log's END line: the
// exception class of a traceback's last line ("RuntimeError"), else the
// reason itself, cut to fit.
func shortReason(reason string, room int) string {
	if m := exceptionHead.FindStringSubmatch(reason); m != nil {
		reason = m[1]
	}
	if len(reason) > room && room < 12 {
		return "" // no room for a head worth reading
	}
	return runlog.Truncate(reason, room)
}

// replaceEndReasonLocked gives the newest recorded end of p's run p's
// reason: a stronger cause came after the first failed end.
func (s *Server) replaceEndReasonLocked(p phaseapi.Phase) {
	for i := len(s.ends) - 1; i >= 0; i-- {
		if end := &s.ends[i]; end.Phase == p.Name && end.Started.Equal(p.Started) {
			end.Reason, end.Outside = p.Reason, reasonStrength(p.Reason) == reasonOutside
			return
		}
	}
}
