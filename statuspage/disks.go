package statuspage

import (
	"time"

	"github.com/lavender-ml/lavender/diskguard"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/watchdog"
)

// Disk is one watched filesystem, or one watched path that cannot be read
// or does not exist yet, as the page shows it.
type Disk struct {
	Path string `json:"path"`
	// Paths are every watched path that leads to the filesystem, where
	// they are more than Path alone.
	Paths []string `json:"paths,omitempty"`
	// State is "ok", "unreadable" (statfs failed or hung: Error says
	// which, Since since when), "missing" (watched once it appears) or
	// "unwatched" (a running phase's directory the guard leaves out:
	// Reason says why).
	State  string    `json:"state"`
	Error  string    `json:"error,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Reason string    `json:"reason,omitempty"`

	SizeBytes  uint64 `json:"size_bytes,omitzero"`
	AvailBytes uint64 `json:"avail_bytes,omitzero"`
	UsedBytes  uint64 `json:"used_bytes,omitzero"`
	Files      uint64 `json:"files,omitzero"`
	FilesFree  uint64 `json:"files_free,omitzero"`
	// SaveBytes is the size of one checkpoint save, 0 while unknown;
	// SaveReported: a client reported it rather than it being learned.
	SaveBytes    uint64 `json:"save_bytes,omitzero"`
	SaveReported bool   `json:"save_reported,omitzero"`
	// FillsInSeconds is how long the free space lasts at the rate of the
	// last 30 minutes; absent while unknown or not filling.
	FillsInSeconds *float64 `json:"fills_in_seconds,omitempty"`
	// Phases are the phases with a directory on it.
	Phases []string `json:"phases,omitempty"`
	// Short lists the conditions met now: "save" (the next save will not
	// fit), "floor" (under --watchdog.disk-min-free), "inodes".
	Short []watchdog.DiskKind `json:"short,omitempty"`
}

// newDisks turns the guard's last poll into the page's rows: the
// filesystems, then the unreadable paths, then those not there yet, then
// the phases' directories left unwatched.
func newDisks(snap diskguard.Snapshot, minFree watchdog.MinFree) []Disk {
	out := []Disk{}
	for _, f := range snap.Filesystems {
		d := Disk{
			Path: f.Path, State: "ok", SizeBytes: f.Stat.Size, AvailBytes: f.Stat.Avail, UsedBytes: f.Stat.Used(),
			Files: f.Stat.Files, FilesFree: f.Stat.FilesFree, SaveBytes: f.SaveBytes, SaveReported: f.SaveReported, Phases: f.Writers,
		}
		// The name is not always among the paths (the phase whose
		// directory named the filesystem may have ended), and then the
		// paths that lead to it now are what the row must show.
		if len(f.Paths) > 1 || len(f.Paths) == 1 && f.Paths[0] != f.Path {
			d.Paths = f.Paths
		}
		wd := watchdog.DiskOf(f)
		if fills, ok := wd.FillsIn(); ok {
			secs := fills.Seconds()
			d.FillsInSeconds = &secs
		}
		d.Short = watchdog.DiskShort(wd, minFree)
		out = append(out, d)
	}
	for _, u := range snap.Unreadable {
		out = append(out, Disk{Path: u.Path, State: "unreadable", Error: u.Err, Since: u.Since})
	}
	for _, p := range snap.Missing {
		out = append(out, Disk{Path: p, State: "missing"})
	}
	for _, n := range snap.NotWatched {
		out = append(out, Disk{Path: n.Path, State: "unwatched", Reason: n.Reason, Phases: n.Writers})
	}
	return out
}

// FreeShare is the share of the filesystem still free, 0–1.
func (d Disk) FreeShare() float64 {
	if d.SizeBytes == 0 {
		return 0
	}
	return float64(d.AvailBytes) / float64(d.SizeBytes)
}

// FilesFreeShare is the share of inodes still free, 0–1; 0 without a
// fixed number of them.
func (d Disk) FilesFreeShare() float64 {
	if d.Files == 0 {
		return 0
	}
	return float64(d.FilesFree) / float64(d.Files)
}

// LowMark is where the bar, which shows the free space as its text does,
// turns to the warning colour: 5 % free.
func (d Disk) LowMark() uint64 { return d.SizeBytes / 20 }

// FillsIn is FillsInSeconds as a duration, 0 when unknown.
func (d Disk) FillsIn() time.Duration {
	if d.FillsInSeconds == nil {
		return 0
	}
	return time.Duration(*d.FillsInSeconds * float64(time.Second))
}

// ShortText is what the page says of a condition met now.
func ShortText(kind watchdog.DiskKind, minFree watchdog.MinFree) string {
	switch kind {
	case watchdog.DiskSave:
		return "the next save will not fit"
	case watchdog.DiskFloor:
		return "under the " + pushtext.MinFree(minFree) + " floor"
	case watchdog.DiskInodes:
		return "under 5% of inodes free"
	}
	return string(kind)
}
