package phaseserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/runlog"
)

const (
	// maxPhases bounds the phase label's values: at most this many phases
	// live per run, so a buggy client cannot blow up the series count.
	maxPhases = 64

	// pingSaveInterval throttles saving the table on pings: a client that
	// pings in a tight loop must not cost an fsync each time. Starts, ends
	// and first sightings are saved at once; at worst a restart loses a few
	// seconds of last-heartbeat time and some heartbeat counts.
	pingSaveInterval = 10 * time.Second

	phaseFileVersion = 1
	phaseFileSuffix  = ".phases.json"
	// maxPhaseFileBytes bounds the read of a saved table. A full table is
	// some 20 KiB; anything over this was not written by lavender.
	maxPhaseFileBytes = 1 << 20
)

// Errors a heartbeat can fail with; the API maps each to a status code.
var (
	errBadEvent      = errors.New("unknown event")
	errBadStatus     = errors.New("bad status")
	errBadProgress   = errors.New("bad progress")
	errUnknownPhase  = errors.New("unknown phase")
	errPhaseEnded    = errors.New("phase already ended")
	errOKAfterFailed = errors.New("phase already failed")
	errTooManyPhases = errors.New("too many active phases")
)

// phaseDuration is how long p has run by now, or ran once ended.
func phaseDuration(p phaseapi.Phase, now time.Time) time.Duration {
	end := now
	if !p.Active() {
		end = p.Ended
	}
	return max(end.Sub(p.Started), 0)
}

// phaseFile is the on-disk form of a run's phase table.
type phaseFile struct {
	Version int              `json:"version"`
	Run     string           `json:"run"`
	Started time.Time        `json:"run_started"`
	Phases  []phaseapi.Phase `json:"phases"`
}

// phaseTable is the state of one run. Phases keep the order in which they
// were first seen.
type phaseTable struct {
	run    phaseapi.Run // run.File == "" while no run log exists
	phases []phaseapi.Phase
}

func (t *phaseTable) find(name string) int {
	for i := range t.phases {
		if t.phases[i].Name == name {
			return i
		}
	}
	return -1
}

// victim returns the phase to evict before a new one is added: -1 if there
// is room, the ended phase that ended first if the table is full, or an
// error if every phase is still active.
func (t *phaseTable) victim() (int, error) {
	if len(t.phases) < maxPhases {
		return -1, nil
	}
	v := -1
	for i, p := range t.phases {
		if !p.Active() && (v < 0 || p.Ended.Before(t.phases[v].Ended)) {
			v = i
		}
	}
	if v < 0 {
		return -1, fmt.Errorf("%w: all %d phases of this run are active; end one first", errTooManyPhases, maxPhases)
	}
	return v, nil
}

func startLine(name string) string { return "START " + name }

// endLine is "END   <name> <N>s", then how the phase ended if not plainly:
// "failed" (with the head of its reason: "failed: RuntimeError"), "died"
// (its process ended without an end), "unknown" (its process ended while
// no lavender watched, and no end came), "restarted" (a new start came while
// it ran) or "abandoned" (a new run came while it ran). A long name is
// shortened so that the line stays within the run log's 80 bytes; the
// duration and the mark never are, and the reason gets what room is left.
func endLine(p phaseapi.Phase, how string) string {
	if how == "" && p.Status == phaseapi.StatusFailed {
		how = phaseapi.StatusFailed
	}
	suffix := fmt.Sprintf(" %ds", int64(phaseDuration(p, p.Ended)/time.Second))
	if how != "" {
		suffix += " " + how
	}
	const prefix = "END   "
	line := prefix + runlog.Truncate(p.Name, runlog.MaxMessageBytes-len(prefix)-len(suffix)) + suffix
	if how == phaseapi.StatusFailed && p.Reason != "" {
		if r := shortReason(p.Reason, runlog.MaxMessageBytes-len(line)-len(": ")); r != "" {
			line += ": " + r
		}
	}
	return line
}

// phaseFilePath is where the phase table of the run log at runPath lives:
// beside it, named after it, so a table can never be applied to another run.
func phaseFilePath(runPath string) string {
	return strings.TrimSuffix(runPath, ".log") + phaseFileSuffix
}

// runStartFromName recovers a run's start from its log's name
// (run-YYYYMMDD-HHMMSS[-N].log, local time, as runlog names it).
func runStartFromName(base string) time.Time {
	s := strings.TrimPrefix(base, "run-")
	if len(s) < len("20060102-150405") {
		return time.Time{}
	}
	t, err := time.ParseInLocation("20060102-150405", s[:len("20060102-150405")], time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

// loadTable reads the phase table saved beside the run log at runPath. A
// missing file gives an empty table. A damaged one (bad JSON, another run's,
// over 1 MiB, or not a regular file: a FIFO would block the read and
// /dev/zero never end) is moved aside, numbered, never deleted or
// overwritten, and also gives an empty table. One that cannot be read gives
// an empty table and an error wrapping runlog.ErrUnreadable.
func loadTable(runPath string) (phaseTable, error) {
	base := filepath.Base(runPath)
	empty := phaseTable{run: phaseapi.Run{File: base, Started: runStartFromName(base)}}
	path := phaseFilePath(runPath)
	var t phaseTable
	found, err := runlog.ReadSavedFile(path, maxPhaseFileBytes, "phaseserver: load phases", func(data []byte) (err error) {
		t, err = decodeTable(data, base)
		return err
	})
	if !found {
		return empty, err
	}
	return t, nil
}

func decodeTable(data []byte, runFile string) (phaseTable, error) {
	var f phaseFile
	if err := json.Unmarshal(data, &f); err != nil {
		return phaseTable{}, err
	}
	if f.Version != phaseFileVersion {
		return phaseTable{}, fmt.Errorf("version %d, want %d", f.Version, phaseFileVersion)
	}
	if f.Run != runFile {
		return phaseTable{}, fmt.Errorf("belongs to run %q, not %q", f.Run, runFile)
	}
	t := phaseTable{run: phaseapi.Run{File: runFile, Started: f.Started}}
	for _, p := range f.Phases {
		name, err := phaseapi.NormalizePhaseName(p.Name)
		if err != nil || name != p.Name {
			return phaseTable{}, fmt.Errorf("phase %q: bad name", p.Name)
		}
		if t.find(name) >= 0 {
			return phaseTable{}, fmt.Errorf("phase %q listed twice", name)
		}
		switch p.Status {
		case phaseapi.StatusActive:
			p.Ended = time.Time{}
		case phaseapi.StatusOK, phaseapi.StatusFailed, phaseapi.StatusUnknown:
			if p.Ended.IsZero() {
				return phaseTable{}, fmt.Errorf("phase %q: ended without an end time", name)
			}
		default:
			return phaseTable{}, fmt.Errorf("phase %q: status %q", name, p.Status)
		}
		if p.Started.IsZero() {
			return phaseTable{}, fmt.Errorf("phase %q: no start time", name)
		}
		p.DurationSeconds, p.ETASeconds = 0, nil // derived, never trusted from disk
		if p.Step != nil && p.Total > 0 && *p.Step > p.Total {
			return phaseTable{}, fmt.Errorf("phase %q: step %d past the total of %d", name, *p.Step, p.Total)
		}
		if !(p.Rate >= 0) || !(p.GapSeconds >= 0) || math.IsInf(p.Rate, 0) || math.IsInf(p.GapSeconds, 0) || !(p.RateWeight >= 0 && p.RateWeight <= 1) {
			return phaseTable{}, fmt.Errorf("phase %q: bad step rate", name)
		}
		if err := checkSavedWork(p); err != nil {
			return phaseTable{}, fmt.Errorf("phase %q: %w", name, err)
		}
		p.Reason = phaseapi.CleanReason(p.Reason)
		if f := p.LastFailure; f != nil {
			if f.Started.IsZero() || f.Ended.Before(f.Started) {
				return phaseTable{}, fmt.Errorf("phase %q: bad last failure", name)
			}
			p.LastFailure = &phaseapi.Failure{Started: f.Started, Ended: f.Ended, Reason: phaseapi.CleanReason(f.Reason)}
		}
		t.phases = append(t.phases, p)
	}
	if len(t.phases) > maxPhases {
		return phaseTable{}, fmt.Errorf("%d phases, more than %d", len(t.phases), maxPhases)
	}
	return t, nil
}

// saveTable writes t beside its run log atomically: temp file, fsync,
// rename, fsync of the directory.
func saveTable(dir string, t *phaseTable) error {
	if t.run.File == "" {
		return nil
	}
	phases := t.phases
	if phases == nil {
		phases = []phaseapi.Phase{}
	}
	data, err := json.MarshalIndent(phaseFile{
		Version: phaseFileVersion,
		Run:     t.run.File,
		Started: t.run.Started,
		Phases:  phases,
	}, "", "  ")
	if err != nil {
		return fmt.Errorf("phaseserver: save phases: %w", err)
	}
	path := phaseFilePath(filepath.Join(dir, t.run.File))
	if err := runlog.WriteFileAtomic(path, append(data, '\n')); err != nil {
		return fmt.Errorf("phaseserver: save phases %s: %w", path, err)
	}
	return nil
}
