package delivery

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/lavender-ml/lavender/internal/backoff"
	"github.com/lavender-ml/lavender/runlog"
)

// StateFileName is the file in the logs dir where the serving commands
// keep the bridge's state across a restart or a crash.
const StateFileName = "bark-state.json"

const (
	stateFileVersion = 1
	// maxStateFileBytes bounds the read of a state file. A full dedup
	// memory (10,000 entries) is about 2 MB; anything over this was not
	// written by lavender.
	maxStateFileBytes = 32 << 20
	// stateSaveInterval is the longest a change of the dedup memory alone
	// waits for its save on a healthy disk, and the least time between two
	// tries to save; held alerts are saved at once, unless the last try
	// failed less than this long ago.
	stateSaveInterval = time.Second
	// stateRetryMax caps the wait between the tries of a save that failed
	// (a full or read-only logs dir): the wait doubles from
	// stateSaveInterval up to this, so held alerts reach the disk at most
	// this long after space is back, with nothing else happening.
	stateRetryMax = 30 * time.Second
	// maxSavedField bounds a fingerprint or target id read back; lavender
	// writes 16 hex digits.
	maxSavedField = 128
)

// stateFile is what the bridge must not forget when it stops or dies:
// the alerts storm control holds (Alertmanager was answered 200 for them
// and will not send them again for hours) and the dedup memory (without
// it, Alertmanager's next send of a group pushes every alert in it again).
type stateFile struct {
	Version int          `json:"version"`
	Storm   []stormSaved `json:"storm"`
	Dedup   []dedupSaved `json:"dedup"`
}

// bridgeState saves the bridge's state to its file.
type bridgeState struct {
	path string   // "": nothing is kept
	lock *os.File // holds the lock beside the file (lockState)

	// every is the least time between two tries to save, and the first
	// wait after a failed one; retryMax caps that wait as it doubles
	// (stateSaveInterval and stateRetryMax; tests shorten them).
	every, retryMax time.Duration

	mu      sync.Mutex    // serialises saves
	stopped bool          // Close was called: nothing is saved any more
	blocked bool          // the file could not be read: never overwrite it
	saved   uint64        // the change saved last
	retry   time.Duration // the wait after the last try, which failed; 0: it did not fail

	lastTry atomic.Int64 // monoNow of the last try to save, saved or not; 0: none yet
	timerMu sync.Mutex
	timer   *time.Timer // a save put off (saveSoon) or to be tried again (timedSave); nil: none
	due     int64       // monoNow when timer fires
	closed  bool        // Close was called: no timer is armed again
}

// monoStart is the origin of monoNow.
var monoStart = time.Now()

// monoNow is the time on the monotonic clock, in nanoseconds, never 0: a
// change of the wall clock moves no save.
func monoNow() int64 { return int64(time.Since(monoStart)) + 1 }

// changed notes a change of what the state file keeps; the next save
// writes it.
func (b *Pipeline) changed() uint64 { return b.changes.Add(1) }

// restoreState reads the state file, if there is one, and takes its held
// alerts and dedup memory. A damaged file (bad JSON, another version, over
// the limit, not a regular file) is moved aside, numbered, with a WARN; an
// unreadable one is left as it is and never overwritten; neither stops the
// bridge.
func (b *Pipeline) restoreState() {
	st := &b.state
	if st.path == "" {
		return
	}
	if b.lockState(); st.path == "" {
		return
	}
	f, err := readState(st.path)
	if errors.Is(err, runlog.ErrUnreadable) {
		st.blocked = true
		b.logger.Error("[bark] BARK STATE CANNOT BE READ: it will not be overwritten, and held alerts and the dedup memory are kept in memory only until it can",
			"err", err)
		return
	}
	if err != nil {
		b.logger.Warn("[bark] damaged Bark state not restored", "err", err)
	}
	if f == nil {
		return
	}
	b.applyState(f)
}

// applyState takes f's held alerts and dedup memory into the bridge.
// Held alerts follow their phone or target to its key now
// (stormKeys.follow); those of a phone or target no longer configured are
// dropped, with a WARN.
func (b *Pipeline) applyState(f *stateFile) {
	now := b.cfg.Now()
	keys := keysOf(b.current())
	// The targets the file knows: one of them configured now under another
	// key moved there, rather than being a saved target's line edited in
	// place.
	saved := make(map[string]bool)
	for _, s := range f.Storm {
		for _, id := range s.identities() {
			saved[id] = true
		}
	}
	known := func(id string) bool { return saved[id] }
	held, lost := 0, 0
	for _, s := range f.Storm {
		name := keys.follow(s.Target, s.identities(), known)
		n := s.Others
		for _, h := range s.Held {
			n += h.Count
		}
		if name == "" {
			lost += n
			continue
		}
		b.storm.restore(name, s, now)
		held += n
	}
	restored := b.dedup.restore(f.Dedup, now)
	if lost > 0 {
		b.logger.Warn("[bark] held alerts of a target no longer configured are dropped", "alerts", lost)
	}
	b.logger.Info("[bark] restored Bark state", "file", b.state.path, "held", held, "dedup", restored)
	if held > 0 || lost > 0 {
		b.changed()
	}
}

// readState reads and checks a state file; nil, nil when there is none.
func readState(path string) (*stateFile, error) {
	var f *stateFile
	_, err := runlog.ReadSavedFile(path, maxStateFileBytes, "delivery: read state", func(data []byte) (err error) {
		f, err = decodeState(data)
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// decodeState parses a state file and refuses what lavender never writes.
// Names are cleaned again, so the file cannot bring a summary a name no
// alert could.
func decodeState(data []byte) (*stateFile, error) {
	var f stateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Version != stateFileVersion {
		return nil, fmt.Errorf("version %d, want %d", f.Version, stateFileVersion)
	}
	if len(f.Storm) > stormMaxTargets {
		return nil, fmt.Errorf("%d targets, more than %d", len(f.Storm), stormMaxTargets)
	}
	for i := range f.Storm {
		s := &f.Storm[i]
		if !savedField(s.Target) || !savedField(s.TargetID) || !savedIDs(s.TargetIDs) {
			return nil, fmt.Errorf("storm entry %d: bad target", i)
		}
		if len(s.Sent) > MaxMaxPerMinute || len(s.Held) > stormMaxNames || s.Others < 0 {
			return nil, fmt.Errorf("target %s: more than lavender keeps", s.Target)
		}
		total := s.Others
		for j := range s.Held {
			h := &s.Held[j]
			if h.Count <= 0 || h.Count > 1<<30 {
				return nil, fmt.Errorf("target %s: held count %d", s.Target, h.Count)
			}
			if (h.Alert != "") && (h.Watchdog != "" || h.Words != "") || h.Watchdog != "" && h.Words != "" {
				return nil, fmt.Errorf("target %s: an event both an alert and a watchdog rule", s.Target)
			}
			h.Alert, h.Watchdog, h.Words = summaryName(h.Alert), summaryName(h.Watchdog), summaryName(h.Words)
			total += h.Count
		}
		if total > 1<<30 {
			return nil, fmt.Errorf("target %s: %d held alerts", s.Target, total)
		}
	}
	for i, d := range f.Dedup {
		if !savedField(d.Target) || !(savedField(d.Incident) || d.Incident == "" && savedField(d.Fingerprint)) || (d.Status != "firing" && d.Status != "resolved") || d.Expires.IsZero() {
			return nil, fmt.Errorf("dedup entry %d: bad entry", i)
		}
	}
	return &f, nil
}

func savedField(s string) bool { return s != "" && len(s) <= maxSavedField && utf8.ValidString(s) }

func savedIDs(ids []string) bool {
	return len(ids) <= maxSavedIDs && !slices.ContainsFunc(ids, func(id string) bool { return !savedField(id) })
}

// saveSoon saves the state within stateSaveInterval of the last try to
// save: now, if that try is as old, else by a timer. A save already put
// off, or to be tried again after a failure, takes this change too; so
// while the disk is full, a push costs no try of its own.
func (b *Pipeline) saveSoon() {
	st := &b.state
	if st.path == "" {
		return
	}
	st.timerMu.Lock()
	pending := st.timer != nil || st.closed
	st.timerMu.Unlock()
	if pending {
		return
	}
	if last := st.lastTry.Load(); last != 0 {
		if wait := st.every - time.Duration(monoNow()-last); wait > 0 {
			b.saveAfter(wait)
			return
		}
	}
	b.saveStateThrough(b.changes.Load())
}

// saveAfter arms the save timer to fire in d, unless it fires sooner
// already; one that is firing now tries the save itself.
func (b *Pipeline) saveAfter(d time.Duration) {
	st := &b.state
	st.timerMu.Lock()
	defer st.timerMu.Unlock()
	if st.closed {
		return
	}
	due := monoNow() + int64(d)
	switch {
	case st.timer == nil:
		st.timer = time.AfterFunc(d, b.timedSave)
	case st.due <= due || !st.timer.Stop():
		return
	default:
		st.timer.Reset(d)
	}
	st.due = due
}

// timedSave is the save timer's: it saves what changed, and a failure arms
// the timer again (saveStateThrough).
func (b *Pipeline) timedSave() {
	st := &b.state
	st.timerMu.Lock()
	st.timer = nil
	closed := st.closed
	st.timerMu.Unlock()
	if !closed {
		b.saveStateThrough(b.changes.Load())
	}
}

// saveState writes the state file now if anything changed since the last
// save, whenever the last try was: Flush's last save before a stop.
func (b *Pipeline) saveState() { b.save(b.changes.Load(), true) }

// saveStateThrough returns once change (a number changed returned) is
// saved, by this call or by one that took the state after it, or the save
// failed. So callers that queue behind a save on the disk share the next
// one, whatever changed meanwhile, rather than each writing the file again.
//
// Held alerts are saved this way, at once; but while saves fail, at most
// one try is made per stateSaveInterval: a try within it leaves the save
// to the timer, which tries it again until it succeeds.
func (b *Pipeline) saveStateThrough(change uint64) { b.save(change, false) }

// save writes the state file atomically (temp file, fsync, rename, fsync
// of the dir), as the exporter saves its phase table. A failure is counted
// in the bridge's write errors and logged at most once a minute; the state
// stays in memory, a stop still sends what is held, and the save is tried
// again by a timer, after a wait that doubles from stateSaveInterval up to
// stateRetryMax, until it succeeds. anyway tries even within
// stateSaveInterval of a failed try.
func (b *Pipeline) save(change uint64, anyway bool) {
	st := &b.state
	if st.path == "" {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if change <= st.saved || st.stopped {
		return
	}
	if st.retry > 0 && !anyway {
		if wait := st.every - time.Duration(monoNow()-st.lastTry.Load()); wait > 0 {
			b.saveAfter(wait)
			return
		}
	}
	st.lastTry.Store(monoNow())
	change = b.changes.Load() // the snapshot below holds every change up to here
	if err := b.writeState(); err != nil {
		b.stateFailed(err)
		st.retry = backoff.Next(st.retry, st.every, st.retryMax)
		b.saveAfter(st.retry)
		return
	}
	st.saved, st.retry = change, 0
}

// writeState writes the state in memory to the file. Caller holds
// b.state.mu.
func (b *Pipeline) writeState() error {
	st := &b.state
	if st.blocked && !b.unblockState() {
		return fmt.Errorf("delivery: save state %s: the file there cannot be read, so it is not overwritten", st.path)
	}
	now := b.cfg.Now()
	f := stateFile{Version: stateFileVersion, Storm: b.storm.snapshot(now), Dedup: b.dedup.snapshot(now)}
	keys := keysOf(b.current())
	// An entry of a target no longer configured (held by a Send that began
	// before a reload removed it) is left out: its summary has nowhere to
	// go, and an entry without a target's identity would make the next
	// start refuse the whole file, every other held alert and the dedup
	// memory with it.
	f.Storm = slices.DeleteFunc(f.Storm, func(s stormSaved) bool { return len(keys.ids[s.Target]) == 0 })
	for i := range f.Storm {
		s := &f.Storm[i]
		ids := keys.ids[s.Target]
		s.TargetID = ids[0]
		s.TargetIDs = ids[:min(len(ids), maxSavedIDs)]
	}
	if f.Storm == nil {
		f.Storm = []stormSaved{}
	}
	data, err := json.Marshal(f)
	if err == nil && len(data) > maxStateFileBytes {
		err = fmt.Errorf("%d bytes, over the %d a start reads", len(data), maxStateFileBytes)
	}
	if err == nil {
		err = os.MkdirAll(filepath.Dir(st.path), 0o755)
	}
	if err == nil {
		err = runlog.WriteFileAtomic(st.path, append(data, '\n'))
	}
	if err != nil {
		return fmt.Errorf("delivery: save state %s: %w", st.path, err)
	}
	return nil
}

// unblockState tries again to read a state file that could not be read.
// Once it can (or it turned out damaged and was moved aside), what it held
// is merged with the state in memory, and saving resumes. Caller holds
// b.state.mu.
func (b *Pipeline) unblockState() bool {
	f, err := readState(b.state.path)
	if errors.Is(err, runlog.ErrUnreadable) {
		return false
	}
	if err != nil {
		b.logger.Warn("[bark] damaged Bark state not restored", "err", err)
	}
	b.state.blocked = false
	if f != nil {
		b.applyState(f)
	}
	b.logger.Warn("[bark] Bark state readable again; what it held is merged with the state kept in memory", "file", b.state.path)
	return true
}

func (b *Pipeline) stateFailed(err error) {
	b.cfg.WriteErrors.Inc()
	if logIt, suppressed := b.stateErrors.Report(); logIt {
		b.logger.Warn("[bark] Bark state not saved; held alerts and the dedup memory are kept in memory", "err", err, "suppressed_since_last_report", suppressed)
	}
}
