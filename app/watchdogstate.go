package app

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/lavender-ml/lavender/runlog"
	"github.com/lavender-ml/lavender/watchdog"
)

// WatchdogStateFileName is the file in the logs dir, beside delivery's
// bark-state.json, where serve keeps its watchdog's open incidents across
// a restart or a crash: a swap incident still there after the restart is
// the same notification, and one gone meanwhile is resolved.
const WatchdogStateFileName = "watchdog-state.json"

const (
	watchdogStateVersion = 1
	// maxWatchdogStateBytes bounds the read: a few hundred incidents are
	// some 100 KiB; anything over this was not written by lavender.
	maxWatchdogStateBytes = 1 << 20
	// maxCarriedIncidents bounds what a file can bring back.
	maxCarriedIncidents = 1024
)

type watchdogStateFile struct {
	Version   int                     `json:"version"`
	Incidents []watchdog.OpenIncident `json:"incidents"`
}

// watchdogState saves the open incidents the watchdog reports. The
// watchdog writes no files; serve keeps them here.
type watchdogState struct {
	path   string
	logger *slog.Logger
	// blocked: the file exists but could not be read nor moved aside; it
	// may hold the only record of open incidents, so it is never replaced.
	blocked bool
}

// openWatchdogState reads the incidents the process before left in dir. A
// missing file gives none; a damaged one (bad JSON, another version, too
// large, not a regular file) is moved aside and logged; one that cannot be
// read is logged and never overwritten. None of these stops serve: the
// pushes matter more than the record.
func openWatchdogState(dir string, logger *slog.Logger) (*watchdogState, []watchdog.OpenIncident) {
	st := &watchdogState{path: filepath.Join(dir, WatchdogStateFileName), logger: logger}
	incidents, err := readWatchdogState(st.path)
	switch {
	case err == nil:
		if len(incidents) > 0 {
			logger.Info("watchdog incidents carried over from the last run of serve", "incidents", len(incidents))
		}
		return st, incidents
	case errors.Is(err, runlog.ErrUnreadable):
		st.blocked = true
		logger.Error("watchdog state cannot be read: open incidents are not carried over, and the file is not overwritten; check its permissions", "err", err)
	default:
		logger.Warn("watchdog state damaged: open incidents are not carried over", "err", err)
	}
	return st, nil
}

func readWatchdogState(path string) ([]watchdog.OpenIncident, error) {
	var f watchdogStateFile
	_, err := readStateFile(path, maxWatchdogStateBytes, &f, func() error {
		switch {
		case f.Version != watchdogStateVersion:
			return fmt.Errorf("version %d, want %d", f.Version, watchdogStateVersion)
		case len(f.Incidents) > maxCarriedIncidents:
			return fmt.Errorf("%d incidents, more than %d", len(f.Incidents), maxCarriedIncidents)
		}
		for _, o := range f.Incidents {
			if o.Rule == "" || o.Began.IsZero() {
				return fmt.Errorf("an incident without its rule or its start: %+v", o)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f.Incidents, nil
}

// save writes the open incidents atomically (temp file, fsync, rename,
// fsync of the dir), as the phase table and delivery's state are written:
// a kill -9 leaves the last incidents whole. A failed save is logged; the
// next change tries again.
func (st *watchdogState) save(incidents []watchdog.OpenIncident) {
	if st.blocked {
		return
	}
	if incidents == nil {
		incidents = []watchdog.OpenIncident{}
	}
	if err := writeStateFile(st.path, watchdogStateFile{Version: watchdogStateVersion, Incidents: incidents}); err != nil {
		st.logger.Error("watchdog state not saved: open incidents may not carry over a restart", "err", err)
	}
}
