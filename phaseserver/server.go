// Package phaseserver is the heartbeat API's server side: the phase table
// of the current run (saved beside its run log), each phase's START and END
// lines in the run log, the ends the watchdog pushes, the processes behind
// the phases judged alive or dead, and the phase metrics. The API's client
// and the `lavender phase run` wrapper are package heartbeat; the wire
// format both speak is phaseapi. It reads no host metric: those are
// package exporter's collectors.
package phaseserver

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/internal/throttle"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/proctree"
	"github.com/lavender-ml/lavender/runlog"
)

// defaultProcFS is where the phases' processes are looked up unless
// Config.ProcFS says otherwise.
const defaultProcFS = "/proc"

// Config configures a Server. Only Runlog.Dir usually needs setting.
type Config struct {
	// ProcFS is the procfs mount the phases' processes are judged in;
	// default /proc.
	ProcFS string
	// Runlog locates the run logs; the phase tables are saved beside them.
	Runlog runlog.Options
	// Clock is the time source; default time.Now. It also stamps run-log
	// entries unless Runlog.Now is set.
	Clock func() time.Time
	// WriteErrors counts failed writes to the logs dir (run-log entries,
	// phase tables). cmd/lavender passes the server's series of
	// lavender_runlog_write_errors_total; default a counter nobody exports.
	WriteErrors prometheus.Counter
}

// Server holds the phase table of the current run and serves the
// heartbeat API. It is a prometheus.Collector of the phase metrics. It is
// safe for concurrent use.
type Server struct {
	procfs string
	opts   runlog.Options
	clock  func() time.Time
	logger *slog.Logger

	// writeErrors counts failed writes to the logs dir; logErrors keeps
	// their log lines to one a minute, since a full disk fails them all.
	writeErrors prometheus.Counter
	logErrors   throttle.Reporter

	// view is the phase table as of the last change, for scrapes and the
	// API's reads: they must not wait behind a heartbeat that holds mu
	// while the disk is slow to take its log line or fsync its table.
	view atomic.Pointer[phaseTable]
	// viewLog is the log of the run in view, published with it, so that
	// the status page reads the log without waiting on mu either.
	viewLog atomic.Pointer[runlog.Log]

	mu       sync.Mutex
	table    phaseTable
	log      *runlog.Log // the run log of table.run, nil while unknown
	dirty    bool        // table has changes not yet saved
	lastSave time.Time
	// blocked is set while the run's saved table exists but cannot be
	// read: it is never overwritten, so saves are refused (and counted)
	// until it can be read and merged.
	blocked bool

	// host is this server's boot and pid namespace: a phase's pid is
	// judged only when its heartbeat came from the same (unknown: never).
	host proctree.Host
	// ends are the latest ends of phases, for the watchdog; endsView is
	// their published copy. gone is when a phase's process was first seen
	// gone, for CheckProcesses.
	ends     []phaseapi.PhaseEnd
	endSeq   uint64
	endsView atomic.Pointer[[]phaseapi.PhaseEnd]
	gone     map[phaseRunKey]time.Time
	// inherited are the running phases this server took over from a
	// saved table and has not yet seen alive: their processes were last
	// watched by another server (or none), for CheckProcesses.
	inherited map[phaseRunKey]bool

	// visibility says whether procfs hides the processes of phases.
	visibility procVisibility

	lineageMu sync.Mutex
	lineage   map[int]lineage
	// faults are the newest faults of the kernel log that hit each phase
	// (NoteFault), for the reason of a failed end.
	faults map[string]phaseFault

	refusedTotal *prometheus.CounterVec
	refusedLogs  map[string]*throttle.Reporter
	// droppedLogs keeps the log line of an end taken without its progress
	// to one per throttle interval, as refusedLogs does for refusals.
	droppedLogs *throttle.Reporter
}

// New builds a Server and reloads the phase table of the newest run in
// cfg.Runlog.Dir (if any). It does not start a run: that happens on the
// first heartbeat or through StartRun. Register it as a collector to
// export the phase metrics.
func New(cfg Config, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ProcFS == "" {
		cfg.ProcFS = defaultProcFS
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Runlog.Dir == "" {
		cfg.Runlog.Dir = runlog.DefaultDir
	}
	if cfg.Runlog.Now == nil {
		cfg.Runlog.Now = cfg.Clock
	}
	if cfg.Runlog.Logger == nil {
		cfg.Runlog.Logger = logger
	}
	if cfg.WriteErrors == nil {
		cfg.WriteErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "unexported_write_errors_total"})
	}
	s := &Server{procfs: cfg.ProcFS, opts: cfg.Runlog, clock: cfg.Clock, logger: logger, writeErrors: cfg.WriteErrors}
	s.refusedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lavender_heartbeats_refused_total",
		Help: "Heartbeats the API refused, by reason: malformed, too_large, bad_field, unknown_phase, ended, ok_after_failed, too_many_phases, other.",
	}, []string{"reason"})
	s.droppedLogs = &throttle.Reporter{Now: cfg.Clock}
	s.refusedLogs = make(map[string]*throttle.Reporter, len(refusedReasons))
	for _, r := range refusedReasons {
		s.refusedTotal.WithLabelValues(r)
		s.refusedLogs[r] = &throttle.Reporter{Now: cfg.Clock}
	}
	if h, err := proctree.ReadHost(cfg.ProcFS); err != nil {
		logger.Info("phase processes will not be judged: this host's boot id or pid namespace is unknown", "err", err)
	} else {
		s.host = h
		s.readProcVisibility()
	}

	// A logs dir that cannot be read must not stop the server, as one
	// that fills up does not: it serves, counts the failure, and follows
	// the dir once it is usable (followRunLocked, on each heartbeat).
	path, err := runlog.CurrentPath(cfg.Runlog.Dir)
	switch {
	case errors.Is(err, runlog.ErrNoRun):
	case err != nil:
		s.writeFailed("logs dir unreadable; serving anyway, phases are kept in memory until it can be read", "err", err)
	default:
		if err := s.switchRun(path); err != nil {
			s.writeFailed("logs dir unreadable; serving anyway, phases are kept in memory until it can be read", "err", err)
			break
		}
		// The table was saved by a process that has stopped: nobody took
		// the phases' pings from then until now (see watchdog.Stalled).
		s.table.run.Resumed = s.clock()
		s.restoreEndsLocked()
	}
	s.publishLocked()

	return s
}

// switchRun makes the run log at path the current run, loading its saved
// phase table. The caller holds s.mu (or owns s exclusively).
func (s *Server) switchRun(path string) error {
	s.flushLocked()
	l, err := runlog.Open(s.opts, path)
	if err != nil {
		return fmt.Errorf("phaseserver: %w", err)
	}
	t, err := loadTable(path)
	blocked := errors.Is(err, runlog.ErrUnreadable)
	switch {
	case blocked:
		s.logger.Error("PHASE TABLE CANNOT BE READ: it will not be overwritten, and this run's phases are kept in memory only until it can be read; check its permissions", "err", err)
	case err != nil:
		// A damaged table must not stop the server: the phases come back
		// with the next pings.
		s.logger.Error("phase table not restored", "err", err)
	case len(t.phases) > 0:
		s.logger.Info("phase table restored", "run", t.run.File, "phases", len(t.phases))
	}
	s.table, s.log, s.dirty, s.blocked = t, l, false, blocked
	s.inherited = map[phaseRunKey]bool{}
	for _, p := range t.phases {
		if p.Active() {
			s.inherited[phaseRunKey{p.Name, p.Started.UnixNano()}] = true
		}
	}
	return nil
}

// unblockLocked tries again to read a table that could not be read. Once
// it can (or it turned out damaged and was moved aside), its phases that
// are not in memory are merged in, and saving resumes.
func (s *Server) unblockLocked() bool {
	disk, err := loadTable(filepath.Join(s.opts.Dir, s.table.run.File))
	if errors.Is(err, runlog.ErrUnreadable) {
		return false
	}
	if err != nil {
		s.logger.Error("phase table not restored", "err", err)
	}
	merged := 0
	for _, p := range disk.phases {
		if s.table.find(p.Name) < 0 && len(s.table.phases) < maxPhases {
			s.table.phases = append(s.table.phases, p)
			merged++
		}
	}
	if err == nil {
		s.table.run.Started = disk.run.Started
	}
	s.blocked, s.dirty = false, true
	s.logger.Warn("phase table readable again; its phases are merged with those kept in memory", "run", s.table.run.File, "merged", merged)
	return true
}

// StartRun starts a new run log with header as its header text and
// firstEntry (default runlog.RunStart) as its first entry, and gives it a
// clean phase table. It returns the run log's path.
func (s *Server) StartRun(header, firstEntry string) (string, error) {
	if firstEntry == "" {
		firstEntry = runlog.RunStart
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.publishLocked()
	s.flushLocked()
	l, err := runlog.Start(s.opts, header, firstEntry)
	if err != nil {
		s.writeFailed("cannot start a run log", "err", err)
		return "", fmt.Errorf("phaseserver: start run: %w", err)
	}
	// Only once the new run exists is the old one closed: a run that
	// cannot start leaves the old one as it was, its phases still running.
	s.closeRunLocked()
	s.table = phaseTable{run: phaseapi.Run{File: filepath.Base(l.Path()), Started: s.clock()}}
	s.log, s.blocked = l, false
	s.saveLocked()
	s.logger.Info("run started", "run", s.table.run.File)
	return l.Path(), nil
}

// closeRunLocked ends the old run when a new one starts: each running
// phase gets "END <name> <N>s abandoned" (and ends as failed in the old
// run's table), then the file gets RUN stop unless it already had one
// (serve wrote it at its stop, before a restart without --run.resume).
func (s *Server) closeRunLocked() {
	if s.log == nil {
		return
	}
	now := s.clock()
	stopped := lastMessage(s.log) == runlog.RunStop
	ended := false
	for i := range s.table.phases {
		p := &s.table.phases[i]
		if !p.Active() {
			continue
		}
		p.Status, p.Ended = phaseapi.StatusFailed, now
		s.appendLog(endLine(*p, "abandoned"))
		ended = true
	}
	if ended {
		s.dirty = true
		s.saveLocked()
	}
	if !stopped {
		s.appendLog(runlog.RunStop)
	}
}

// lastMessage is the message of the log's newest entry, "" if unknown.
func lastMessage(l *runlog.Log) string {
	data, err := l.Read()
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	last := lines[len(lines)-1]
	if len(last) < len("15:04:05 ") {
		return ""
	}
	return last[len("15:04:05 "):]
}

// heartbeat applies one event to the phase named name and returns the
// phase as it now stands. status goes only with EventEnd ("" means ok).
// On any error nothing changes.
func (s *Server) heartbeat(name, event, status string) (phaseapi.Phase, error) {
	return s.Apply(phaseapi.HeartbeatRequest{Phase: name, Event: event, Status: status})
}

// Apply applies one heartbeat, with the progress it may carry, and returns
// the phase as it now stands. On any error nothing changes: the request is
// checked, then checked against the table, and only then applied.
func (s *Server) Apply(req phaseapi.HeartbeatRequest) (phaseapi.Phase, error) {
	p, _, err := s.apply(req)
	return p, err
}

// apply is Apply that also returns a warning: what it left out of a
// heartbeat it took (an end's bad progress), "" when it took it whole.
func (s *Server) apply(req phaseapi.HeartbeatRequest) (p phaseapi.Phase, warning string, err error) {
	name, status, err := checkHeartbeat(req)
	if err != nil {
		return phaseapi.Phase{}, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.publishLocked()
	if err := s.followRunLocked(); err != nil {
		return phaseapi.Phase{}, "", err
	}
	now := s.clock()
	i, evict, dropped, err := s.admitLocked(name, status, req)
	if err != nil {
		return phaseapi.Phase{}, "", err
	}
	if dropped != nil {
		req.Step, req.Total = nil, nil
		warning = fmt.Sprintf("end recorded without its step and total (%v)", dropped)
		if logIt, suppressed := s.droppedLogs.Report(); logIt {
			s.logger.Warn("phase end recorded without its progress", "phase", name, "status", status, "err", dropped, "suppressed_since_last_report", suppressed)
		}
	}
	if s.table.run.File == "" {
		s.startRunForEventLocked(now)
	}
	if evict >= 0 {
		s.logger.Debug("phase evicted", "phase", s.table.phases[evict].Name)
		s.table.phases = append(s.table.phases[:evict], s.table.phases[evict+1:]...)
		i = s.table.find(name)
	}

	save := true
	switch req.Event {
	case phaseapi.EventStart:
		if s.joinsLocked(i, req) {
			// A process of the running phase (a script the wrapper runs
			// that sends its own start) reports into it: no restart.
			i, save = s.pingLocked(i, name, now)
			break
		}
		i = s.startLocked(i, name, now)
	case phaseapi.EventPing:
		i, save = s.pingLocked(i, name, now)
	case phaseapi.EventEnd:
		i = s.endLocked(i, name, status, phaseapi.CleanReason(req.Reason), req.Loss, now)
	}
	advanceProgress(&s.table.phases[i].Progress, req.Step, req.Total, now)
	applyWork(&s.table.phases[i], req, now)
	s.dirty = true
	if save {
		s.saveLocked()
	}
	return answerPhase(s.table.phases[i], now), warning, nil
}

// checkHeartbeat checks a heartbeat on its own: the phase name, the event,
// and a status only with end (ok when left out). It returns the normalised
// name and the status.
func checkHeartbeat(req phaseapi.HeartbeatRequest) (name, status string, err error) {
	name, err = phaseapi.NormalizePhaseName(req.Phase)
	if err != nil {
		return "", "", err
	}
	status = req.Status
	switch req.Event {
	case phaseapi.EventStart, phaseapi.EventPing:
		if status != "" {
			return "", "", fmt.Errorf("%w: status goes only with the end event", errBadStatus)
		}
	case phaseapi.EventEnd:
		if status == "" {
			status = phaseapi.StatusOK
		}
		if status != phaseapi.StatusOK && status != phaseapi.StatusFailed {
			return "", "", fmt.Errorf("%w %q: want ok or failed", errBadStatus, status)
		}
	default:
		return "", "", fmt.Errorf("%w %q: want start, ping or end", errBadEvent, req.Event)
	}
	if err := req.Check(); err != nil {
		return "", "", err
	}
	return name, status, nil
}

// admitLocked checks a heartbeat against the table before anything
// changes: an ok end needs a start, an ended phase takes only a new start
// or a failed end, a new phase needs room (evict is the phase it replaces,
// or -1), and the progress must follow what the phase reported. i is the
// phase's index, or -1 for a phase the table does not hold.
//
// Progress that does not follow refuses a start or a ping, but never an
// end: the end is the news (a success, or a failure and its reason), and
// refusing it would leave the phase running until its process is found
// gone and it is ended as died. Such an end is taken without its step and
// total; dropped says why.
//
// A failed end is news wherever it comes from, so it is taken where an ok
// end is not: for a phase never started (recorded as started and failed at
// once), after an ok end (another rank, a callback that runs after the
// recipe's, the wrapper after an inner client: the phase failed after all),
// and after a failed end (the same failure told twice). An ok end after a
// failed end never undoes the failure.
func (s *Server) admitLocked(name, status string, req phaseapi.HeartbeatRequest) (i, evict int, dropped, err error) {
	i, evict = s.table.find(name), -1
	failedEnd := req.Event == phaseapi.EventEnd && status == phaseapi.StatusFailed
	switch {
	case req.Event == phaseapi.EventEnd && i < 0 && !failedEnd:
		return 0, 0, nil, fmt.Errorf("%w %q: end without a start", errUnknownPhase, name)
	case req.Event == phaseapi.EventEnd && i >= 0 && !failedEnd && s.table.phases[i].Status == phaseapi.StatusFailed:
		p := s.table.phases[i]
		return 0, 0, nil, fmt.Errorf("%w: %q failed at %s; an ok end never undoes a failure", errOKAfterFailed, name, p.Ended.Format(time.RFC3339))
	case req.Event == phaseapi.EventEnd && i >= 0 && s.table.phases[i].Status == phaseapi.StatusUnknown:
		// The end that never came, late (its sender retried past the
		// grace): it says how the phase ended after all.
	case req.Event != phaseapi.EventStart && !failedEnd && i >= 0 && !s.table.phases[i].Active():
		// A late ping or a repeated end must neither revive the phase nor
		// write a second END line; only a new start runs it again.
		p := s.table.phases[i]
		return 0, 0, nil, fmt.Errorf("%w: %q ended at %s; send start to run it again", errPhaseEnded, name, p.Ended.Format(time.RFC3339))
	case i < 0:
		if evict, err = s.table.victim(); err != nil {
			return 0, 0, nil, err
		}
	}
	var known phaseapi.Progress
	if i >= 0 && (req.Event != phaseapi.EventStart || s.joinsLocked(i, req)) {
		known = s.table.phases[i].Progress
	}
	if err := checkProgress(req.Step, req.Total, known); err != nil {
		if req.Event != phaseapi.EventEnd {
			return 0, 0, nil, err
		}
		dropped = err
	}
	return i, evict, dropped, nil
}

// startLocked starts phase name (index i, or -1 if new) and logs START. A
// start while the phase runs is a new attempt (a script rerun after a crash
// that sent no end, a retried wrapper): the earlier one is closed first, so
// the run log never has a START without its END, and the duration counts
// from the new start. It returns the phase's index.
func (s *Server) startLocked(i int, name string, now time.Time) int {
	if i >= 0 && s.table.phases[i].Active() {
		old := s.table.phases[i]
		old.Ended = now
		s.appendLog(endLine(old, "restarted"))
	}
	p := phaseapi.Phase{Name: name, Status: phaseapi.StatusActive, Started: now, LastHeartbeat: now, Heartbeats: 1}
	if i < 0 {
		s.table.phases = append(s.table.phases, p)
		i = len(s.table.phases) - 1
	} else {
		// A restarted phase starts over, but for its failures: a retry
		// loop's next start, before the next scrape, must not hide one.
		p.Failures, p.LastFailure = s.table.phases[i].Failures, s.table.phases[i].LastFailure
		s.table.phases[i] = p
	}
	s.appendLog(startLine(name))
	return i
}

// pingLocked records a ping, which is never logged. A ping for a phase the
// table does not hold (the server lost its table) starts it. It returns
// the phase's index and whether the table is due to be saved: pings save
// it at most once per pingSaveInterval.
func (s *Server) pingLocked(i int, name string, now time.Time) (int, bool) {
	if i < 0 {
		// First seen running (a serve restarted mid-run without
		// --run.resume, a client that never sent its start): the run log
		// gets its START now, so that its END has one, and its duration
		// counts from here, as the START line says.
		s.table.phases = append(s.table.phases, phaseapi.Phase{Name: name, Status: phaseapi.StatusActive, Started: now, LastHeartbeat: now, Heartbeats: 1})
		s.appendLog(startLine(name))
		return len(s.table.phases) - 1, true
	}
	p := &s.table.phases[i]
	p.LastHeartbeat = now
	p.Heartbeats++
	return i, now.Sub(s.lastSave) >= pingSaveInterval
}

// endLocked ends phase name (index i, or -1 if new) with status and
// reason, logs END and records the end for the watchdog. It returns the
// phase's index. A failed end for a phase the table does not hold records
// it as started and failed now; one for a phase that ended ok fails it; a
// second failed end is the same failure (a wrapper after the client
// inside it, two ranks): it keeps the first reason given, unless the
// second says more about the cause within rootCauseWindow (a rank's own
// crash after a SIGTERM the launcher sent the survivors), and records no
// new end.
func (s *Server) endLocked(i int, name, status, reason string, loss *phaseapi.Loss, now time.Time) int {
	if i < 0 {
		s.table.phases = append(s.table.phases, phaseapi.Phase{Name: name, Status: phaseapi.StatusActive, Started: now, LastHeartbeat: now})
		i = len(s.table.phases) - 1
		s.appendLog(startLine(name))
	}
	p := &s.table.phases[i]
	p.LastHeartbeat = now
	p.Heartbeats++
	if p.Status == phaseapi.StatusUnknown {
		p.Reason = "" // the end settles it, with its own reason
	}
	if p.Status == phaseapi.StatusFailed {
		if status == phaseapi.StatusFailed && strongerReason(*p, reason, now) {
			// The first report is not always the first cause: a rank the
			// launcher stopped, or whose peer vanished, tells before the
			// rank that crashed. The end keeps its time; its reason, in
			// the table and in the end the watchdog reads, is the cause.
			p.Reason = reason
			if p.LastFailure != nil {
				f := *p.LastFailure
				f.Reason = reason
				p.LastFailure = &f
			}
			s.replaceEndReasonLocked(*p)
		}
		return i
	}
	p.Status, p.Ended = status, now
	if loss != nil {
		// The end's own loss is the last one: the end the watchdog reads
		// carries it.
		l := *loss
		p.Loss = &l
	}
	if status == phaseapi.StatusFailed {
		reason = s.failedReasonLocked(name, reason, now)
	}
	if reason != "" {
		p.Reason = reason
	}
	if status == phaseapi.StatusFailed {
		noteFailure(p)
	}
	s.appendLog(endLine(*p, ""))
	s.recordEndLocked(*p, false)
	return i
}

// followRunLocked switches to the newest run in the directory if another
// process (or a deleted file) changed it, so the table stays keyed to the
// run whose log gets the START and END lines.
func (s *Server) followRunLocked() error {
	path, err := runlog.CurrentPath(s.opts.Dir)
	switch {
	case errors.Is(err, runlog.ErrNoRun):
		s.loseRunLocked()
		return nil
	case err != nil:
		// The dir cannot be read (gone, replaced, no permission): keep the
		// table in memory rather than refuse the heartbeat.
		s.writeFailed("logs dir unreadable; phases are kept in memory", "err", err)
		return nil
	}
	if filepath.Base(path) == s.table.run.File {
		return nil
	}
	if s.table.run.File != "" && s.runGoneLocked() {
		// The logs dir was emptied (rm -rf logs to free a full disk) and
		// another writer, such as the bridge's BARK line, started a run
		// in it before this heartbeat came.
		s.loseRunLocked()
	}
	if s.table.run.File == "" {
		return s.adoptRunLocked(path)
	}
	// Another process started a run while this one's log still exists
	// (lavender runlog new): a deliberate new run, with a table of its own.
	return s.switchRun(path)
}

// runGoneLocked says whether the log of the run the table is keyed to no
// longer exists.
func (s *Server) runGoneLocked() bool {
	_, err := os.Lstat(filepath.Join(s.opts.Dir, s.table.run.File))
	return errors.Is(err, fs.ErrNotExist)
}

// loseRunLocked unkeys the table from a run whose log vanished. The phases
// stay in memory, still watched and still taking their ends: losing the
// record must not lose the training it records. They go into the next run
// (startRunForEventLocked, adoptRunLocked); until then nothing is saved,
// so no table is left in the dir without its run log.
func (s *Server) loseRunLocked() {
	if s.table.run.File == "" {
		return
	}
	active := 0
	for _, p := range s.table.phases {
		if p.Active() {
			active++
		}
	}
	s.logger.Warn("run log vanished; its phases are kept in memory and carried into the next run", "run", s.table.run.File, "active", active)
	s.table.run, s.log, s.blocked = phaseapi.Run{}, nil, false
	s.dirty = true
}

// adoptRunLocked makes the run at path, which another writer started while
// this server had none, the current run, and merges the phases kept in
// memory into its saved table: a phase held in memory is the newer word on
// it. Each active phase the run's log does not show running gets its
// START line, so that its END has one there.
func (s *Server) adoptRunLocked(path string) error {
	kept := s.table.phases
	if err := s.switchRun(path); err != nil {
		return err
	}
	for _, p := range kept {
		if s.mergeLocked(p) && p.Active() {
			s.appendLog(startLine(p.Name))
		}
	}
	if len(kept) > 0 {
		s.logger.Warn("phases kept in memory carried into a run another writer started", "run", s.table.run.File, "phases", len(kept))
		s.dirty = true
		s.saveLocked()
	}
	return nil
}

// mergeLocked puts p into the table in place of the phase of its name, or
// beside the others, evicting the ended phase that ended first when the
// table is full. It reports whether the table had not held p's name as
// running before.
func (s *Server) mergeLocked(p phaseapi.Phase) bool {
	delete(s.inherited, phaseRunKey{p.Name, p.Started.UnixNano()})
	if i := s.table.find(p.Name); i >= 0 {
		wasActive := s.table.phases[i].Active()
		s.table.phases[i] = p
		return !wasActive
	}
	evict, err := s.table.victim()
	if err != nil {
		s.logger.Error("phase kept in memory not carried into the run: its table is full of running phases", "phase", p.Name, "err", err)
		return false
	}
	if evict >= 0 {
		s.table.phases = slices.Delete(s.table.phases, evict, evict+1)
	}
	s.table.phases = append(s.table.phases, p)
	return true
}

// startRunForEventLocked starts a run for a heartbeat that arrives while the
// directory has none. If the run log cannot be created, the table lives in
// memory only: a record is never a reason to refuse a heartbeat.
func (s *Server) startRunForEventLocked(now time.Time) {
	l, err := runlog.Start(s.opts, "", runlog.RunStart)
	if err != nil {
		s.writeFailed("cannot start a run log; phases are kept in memory only", "err", err)
		return
	}
	s.table.run = phaseapi.Run{File: filepath.Base(l.Path()), Started: now}
	s.log = l
	s.logger.Info("run started by a heartbeat", "run", s.table.run.File)
	// Phases kept in memory while there was no run (its log vanished, or
	// the dir was unusable) still run: the new log gets their START lines,
	// so that their END lines have one.
	for _, p := range s.table.phases {
		if p.Active() {
			s.appendLog(startLine(p.Name))
		}
	}
	if len(s.table.phases) > 0 {
		s.saveLocked()
	}
}

// AppendToRun writes msg to the log of the run the server is on, such as
// serve's "RUN stop", rather than to whatever run is newest in the dir.
func (s *Server) AppendToRun(msg string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return errors.New("phaseserver: no run to append to")
	}
	return s.log.Append(msg)
}

func (s *Server) appendLog(msg string) {
	if s.log == nil {
		return
	}
	if err := s.log.Append(msg); err != nil {
		s.writeFailed("run-log entry lost", "entry", msg, "err", err)
	}
}

func (s *Server) saveLocked() {
	if s.table.run.File == "" {
		// Nowhere to save: the table stays dirty for the run it goes into,
		// and no save is counted against the ping throttle.
		return
	}
	if err := s.saveTableLocked(); err != nil {
		s.writeFailed("phase table not saved; it will be retried with the next heartbeat", "err", err)
		return
	}
	s.dirty = false
	s.lastSave = s.clock()
}

// saveTableLocked saves the table unless the saved one cannot be read,
// which is never overwritten.
func (s *Server) saveTableLocked() error {
	if s.blocked && !s.unblockLocked() {
		return fmt.Errorf("phaseserver: save phases of %s: the saved table cannot be read and is never overwritten; phases are kept in memory only", s.table.run.File)
	}
	if s.table.run.File != "" && s.runGoneLocked() {
		// Saved into a logs dir emptied or made anew, the table would lie
		// there without its run log, for no run to read; the phases go to
		// the next run instead (followRunLocked).
		return fmt.Errorf("phaseserver: save phases of %s: its run log is gone; phases are kept in memory for the next run", s.table.run.File)
	}
	return saveTable(s.opts.Dir, &s.table)
}

// writeFailed counts a failed write to the logs dir and logs it, at most
// once per minute with the number of failures held back meanwhile.
func (s *Server) writeFailed(msg string, args ...any) {
	s.writeErrors.Inc()
	if logIt, suppressed := s.logErrors.Report(); logIt {
		s.logger.Error(msg, append(args, "suppressed_since_last_report", suppressed)...)
	}
}

func (s *Server) flushLocked() {
	if s.dirty {
		s.saveLocked()
	}
}

// Close saves heartbeats that the ping throttle has not saved yet. Call it
// on shutdown; the Server stays usable.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dirty {
		return nil
	}
	if err := s.saveTableLocked(); err != nil {
		return err
	}
	s.dirty = false
	s.lastSave = s.clock()
	return nil
}

// Snapshot returns the current run (nil before the first run) and its
// phases in the order they were first seen.
func (s *Server) Snapshot() (*phaseapi.Run, []phaseapi.Phase) {
	t := s.view.Load()
	now := s.clock()
	phases := make([]phaseapi.Phase, len(t.phases))
	for i, p := range t.phases {
		phases[i] = answerPhase(p, now)
	}
	if t.run.File == "" {
		return nil, phases
	}
	run := t.run
	return &run, phases
}

// answerPhase fills in what is derived from the clock: the duration, the
// ETA and the rate as of now (decayed while no step comes, as the ETA
// uses it). None of them is ever saved.
func answerPhase(p phaseapi.Phase, now time.Time) phaseapi.Phase {
	p.DurationSeconds = phaseDuration(p, now).Seconds()
	p.ETASeconds = nil
	if eta, ok := phaseETA(p, now); ok {
		secs := eta.Seconds()
		p.ETASeconds = &secs
	}
	p.Rate = currentRate(p, now)
	return p
}

// publishLocked makes the table as it now stands what Snapshot returns.
// The caller holds s.mu (or owns s exclusively).
func (s *Server) publishLocked() {
	s.view.Store(&phaseTable{run: s.table.run, phases: slices.Clone(s.table.phases)})
	s.viewLog.Store(s.log)
	ends := slices.Clone(s.ends)
	s.endsView.Store(&ends)
}

// RunLog returns the log of the run the server is on, nil before the
// first run. It never waits on the phase table's lock, so a reader is not
// held up by a heartbeat whose log line or table save is slow; the Log is
// safe for concurrent use.
func (s *Server) RunLog() *runlog.Log { return s.viewLog.Load() }
