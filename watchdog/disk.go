package watchdog

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// Defaults of the disk rules.
const (
	// DefaultDiskMinFree is --watchdog.disk-min-free: the floor of free
	// space, as a share of the filesystem.
	DefaultDiskMinFree = "5%"
	// DiskInodesMinFree is the floor of free inodes, as a share.
	DiskInodesMinFree = 0.05
	// DiskSaveMargin: the next save is taken not to fit once less than a
	// save and this share of one is free (a save's size varies a little
	// with its metadata and optimizer state).
	DiskSaveMargin = 0.10
	// DiskHysteresis: a disk condition ends once its need is this share
	// below what is there (free space a quarter over the floor or the next
	// save, a fill time a quarter over the phase's ETA), so a disk
	// hovering at the line does not buzz the phone.
	DiskHysteresis = 0.20
	// DiskUnreadableAfter is how long a watched path must stay unreadable
	// before the phone hears of it: a network filesystem that stalls for
	// seconds is no news, one that has not answered for a minute will hang
	// the next save.
	DiskUnreadableAfter = time.Minute
)

// Disk is one watched filesystem, as the disk rules read it.
type Disk struct {
	// Path names it, and keys its incidents: the disk guard's name for
	// it, which it keeps while it is watched, though newer phases write to
	// it through other paths. Paths are the watched paths that lead to it
	// now (nil: Path alone).
	Path       string
	Paths      []string
	SizeBytes  uint64
	AvailBytes uint64 // what an unprivileged writer may still use
	Files      uint64 // inodes; 0 where there is no fixed number
	FilesFree  uint64
	// SaveBytes is the size of one checkpoint save onto it (0: unknown);
	// SaveReported: a client reported it, rather than it being learned
	// from the jumps of the used bytes.
	SaveBytes    uint64
	SaveReported bool
	// Saving: a save is being written; the save condition waits for what
	// it leaves free.
	Saving bool
	// FillRate is how fast its used bytes grew, in bytes a second, over
	// RateSpan (up to 30 minutes); RateSpan is 0 while unknown.
	FillRate float64
	RateSpan time.Duration
	// Writers are the phases with a directory on it.
	Writers []string

	// A path that could not be read (Sample.UnreadableDisks) says why
	// (the error, or that statfs did not answer: Hung) and since when;
	// its figures are zero.
	Err      string
	ErrSince time.Time
	Hung     bool
}

// FillsIn is how long the free space lasts at FillRate; ok is false when
// the rate is unknown or the disk is not filling.
func (d Disk) FillsIn() (time.Duration, bool) {
	if d.RateSpan <= 0 || !(d.FillRate > 0) {
		return 0, false
	}
	secs := float64(d.AvailBytes) / d.FillRate
	if secs > float64(math.MaxInt64/int64(time.Second)) {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}

// DiskKind is one condition of a disk the disk rule pushes for.
type DiskKind string

const (
	DiskSave   DiskKind = "save"   // less than the next save free
	DiskFill   DiskKind = "fill"   // at its rate it fills before the phase's ETA
	DiskFloor  DiskKind = "floor"  // free space under --watchdog.disk-min-free
	DiskInodes DiskKind = "inodes" // free inodes under DiskInodesMinFree
	// DiskUnreadable: statfs of a watched path has failed or not answered
	// for DiskUnreadableAfter.
	DiskUnreadable DiskKind = "unreadable"
)

// diskKinds is the order of a disk's alerts in a push.
var diskKinds = []DiskKind{DiskSave, DiskFill, DiskFloor, DiskInodes}

// MinFree is a floor of free space: Bytes, or else Ratio of the size.
type MinFree struct {
	Bytes uint64
	Ratio float64
	// Num and Unit are the floor as the flag gave it (10 and "GB", 5 and
	// "%"; Unit spelled as in the flag's help), so that the pushes can say
	// it as the user set it: a decimal 10GB is 9.3 in the binary units
	// the rest of a push uses. Unit is "" for a floor made in code.
	Num  float64
	Unit string
}

// Of is the floor on a filesystem of size bytes; 0: none.
func (m MinFree) Of(size uint64) uint64 {
	if m.Bytes > 0 {
		return m.Bytes
	}
	return uint64(m.Ratio * float64(size))
}

var byteUnits = []struct {
	suffix string // upper case, as matched
	mult   float64
	unit   string // as the flag's help spells it
}{
	{"KIB", 1 << 10, "KiB"}, {"MIB", 1 << 20, "MiB"}, {"GIB", 1 << 30, "GiB"}, {"TIB", 1 << 40, "TiB"},
	{"KB", 1e3, "kB"}, {"MB", 1e6, "MB"}, {"GB", 1e9, "GB"}, {"TB", 1e12, "TB"},
	{"K", 1 << 10, "K"}, {"M", 1 << 20, "M"}, {"G", 1 << 30, "G"}, {"T", 1 << 40, "T"},
	{"B", 1, "B"},
}

// ParseMinFree reads --watchdog.disk-min-free: a percentage of the
// filesystem ("5%", "0.5%") or a size ("10GB", "512MiB", "2G"; kB, MB, GB
// and TB are decimal, KiB, MiB, GiB, TiB and the bare K, M, G, T binary,
// as in df). "0" turns the floor off.
func ParseMinFree(s string) (MinFree, error) {
	v := strings.TrimSpace(s)
	bad := func(why string) (MinFree, error) {
		return MinFree{}, fmt.Errorf("--watchdog.disk-min-free: %q %s; want a percentage such as 5%% or a size such as 10GB", s, why)
	}
	if v == "0" {
		return MinFree{}, nil
	}
	if num, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || !(f > 0 && f < 100) {
			return bad("is not a percentage over 0 and under 100")
		}
		return MinFree{Ratio: f / 100, Num: f, Unit: "%"}, nil
	}
	upper := strings.ToUpper(v)
	for _, u := range byteUnits {
		num, ok := strings.CutSuffix(upper, u.suffix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || !(f > 0) || f*u.mult >= math.MaxUint64 {
			return bad("is not a size over 0")
		}
		return MinFree{Bytes: uint64(f * u.mult), Num: f, Unit: u.unit}, nil
	}
	return bad("has no unit")
}

// DiskConfig tunes the disk rule.
type DiskConfig struct {
	MinFree MinFree       // --watchdog.disk-min-free; zero: no floor
	Repeat  time.Duration // caps the retry backoff; 0: no cap
	Retry   time.Duration // first retry after a push no target accepted; 0: DefaultInterval
}

// DiskRule pushes once for each condition of each watched filesystem
// (DiskKind) when it begins, and its resolution once it has clearly ended
// (DiskHysteresis), with no reminders in between: a full disk stays full
// until someone acts, and the first push says so. A push no target
// accepted is retried with a backoff. A filesystem that cannot be read
// keeps its incidents as they were until it can, and is an incident of
// its own (DiskUnreadable) once that has lasted DiskUnreadableAfter.
type DiskRule struct {
	cfg      DiskConfig
	episodes map[diskKey]*episode
	// held are the incidents carried over a restart (restore) whose
	// figure this process has not read yet: the save size or fill rate
	// the guard learns anew, a path unreadable for less than
	// DiskUnreadableAfter since this process first failed to read it.
	// Not knowing is no end: they stay as they are until it is known.
	held map[diskKey]bool
}

type diskKey struct {
	path string
	kind DiskKind
}

// NewDiskRule checks cfg and returns the rule, armed.
func NewDiskRule(cfg DiskConfig) (*DiskRule, error) {
	if !(cfg.MinFree.Ratio >= 0 && cfg.MinFree.Ratio < 1) {
		return nil, fmt.Errorf("--watchdog.disk-min-free must be under 100%%, not %g%%", cfg.MinFree.Ratio*100)
	}
	repeat, retry, err := cadence(cfg.Repeat, cfg.Retry)
	if err != nil {
		return nil, err
	}
	cfg.Repeat, cfg.Retry = repeat, retry
	return &DiskRule{cfg: cfg, episodes: map[diskKey]*episode{}}, nil
}

// Name is RuleDiskSpace.
func (r *DiskRule) Name() RuleName { return RuleDiskSpace }

// Observe checks every condition of every filesystem the sample read.
func (r *DiskRule) Observe(s Sample, now time.Time) []Alert {
	var out []Alert
	seen := map[diskKey]bool{}
	for _, d := range s.Disks {
		for _, kind := range diskKinds {
			key := diskKey{d.Path, kind}
			seen[key] = true
			ep := r.episode(key)
			if kind == DiskSave && d.Saving {
				continue // judged on what the save leaves, once it is written
			}
			if r.held[key] {
				if !diskKnown(kind, d) {
					continue
				}
				delete(r.held, key)
			}
			value, phase, eta := r.need(kind, d, s)
			for _, a := range ep.level(r.Name(), value, 1, DiskHysteresis, s, now) {
				a.Disk, a.DiskKind, a.Phase, a.ETA, a.MinFree = d, kind, phase, eta, r.cfg.MinFree
				a.Incident = diskIncident(d.Path, kind)
				out = append(out, a)
			}
		}
	}
	for _, d := range s.UnreadableDisks {
		key := diskKey{d.Path, DiskUnreadable}
		seen[key] = true
		ep := r.episode(key)
		value := 0.0
		if !now.Before(d.ErrSince.Add(DiskUnreadableAfter)) {
			value = 1
			delete(r.held, key)
		}
		if r.held[key] {
			continue // carried over, and unreadable still
		}
		for _, a := range ep.level(r.Name(), value, 1, DiskHysteresis, s, now) {
			// The incident began when the path stopped answering, not a
			// minute later when the phone heard of it; one carried over a
			// restart keeps the start the process before saw.
			if ep.began.After(d.ErrSince) {
				ep.began = d.ErrSince
			}
			a.Began = ep.began
			a.Disk, a.DiskKind, a.Incident = d, DiskUnreadable, diskIncident(d.Path, DiskUnreadable)
			out = append(out, a)
		}
	}
	// A path read again ends its unreadable incident with a resolution.
	// One no longer watched (its phase ended) or gone ends it silently:
	// nothing answered, so nothing may say it answers again.
	for key, ep := range r.episodes {
		if key.kind != DiskUnreadable || seen[key] {
			continue
		}
		delete(r.held, key)
		if !readIn(s.Disks, key.path) {
			delete(r.episodes, key)
			continue
		}
		for _, a := range ep.level(r.Name(), 0, 1, DiskHysteresis, s, now) {
			a.Disk, a.DiskKind, a.Incident = Disk{Path: key.path}, DiskUnreadable, diskIncident(key.path, DiskUnreadable)
			out = append(out, a)
		}
		delete(r.episodes, key)
	}
	for key, ep := range r.episodes {
		if !seen[key] && !ep.disarmed {
			delete(r.episodes, key) // gone, with nothing to resolve; an incident waits for the disk
		}
	}
	return out
}

// diskIncident is the Incident of a disk-space alert: one per filesystem
// and condition.
func diskIncident(path string, kind DiskKind) string { return path + "\x00" + string(kind) }

// diskKnown says whether d's reading tells whether kind holds: the save
// size and the fill rate are learned, and unknown for a while after a
// restart.
func diskKnown(kind DiskKind, d Disk) bool {
	switch kind {
	case DiskSave:
		return d.SaveBytes > 0
	case DiskFill:
		return d.RateSpan > 0
	}
	return true
}

// readIn says whether a filesystem of disks was read through path.
func readIn(disks []Disk, path string) bool {
	for _, d := range disks {
		if d.Path == path || slices.Contains(d.Paths, path) {
			return true
		}
	}
	return false
}

// episode is the incident state of one condition of one path, made on
// first sight. No reminders (repeat 0): Pushed caps the backoff.
func (r *DiskRule) episode(key diskKey) *episode {
	ep := r.episodes[key]
	if ep == nil {
		ep = &episode{retry: r.cfg.Retry}
		r.episodes[key] = ep
	}
	return ep
}

// need is how much of the condition's margin is used up: 1 or more is the
// condition met. For the fill condition it also names the phase and its
// ETA.
func (r *DiskRule) need(kind DiskKind, d Disk, s Sample) (value float64, phase string, eta time.Duration) {
	ratio := func(need, have float64) float64 {
		if need <= 0 {
			return 0
		}
		if have <= 0 {
			return math.Inf(1)
		}
		return need / have
	}
	switch kind {
	case DiskSave:
		return ratio(float64(d.SaveBytes)*(1+DiskSaveMargin), float64(d.AvailBytes)), "", 0
	case DiskFloor:
		return ratio(float64(r.cfg.MinFree.Of(d.SizeBytes)), float64(d.AvailBytes)), "", 0
	case DiskInodes:
		return ratio(DiskInodesMinFree*float64(d.Files), float64(d.FilesFree)), "", 0
	}
	fills, ok := d.FillsIn()
	if !ok {
		return 0, "", 0
	}
	p, ok := etaPhase(s, d)
	if !ok {
		return 0, "", 0
	}
	eta = phaseETA(p)
	return ratio(float64(eta), float64(fills)), p.Name, eta
}

// etaPhase is the active phase with an ETA the disk must last for: of the
// phases writing to it if any has an ETA, else of all, the one that needs
// longest.
func etaPhase(s Sample, d Disk) (phaseapi.Phase, bool) {
	var best phaseapi.Phase
	bestWrites, found := false, false
	for _, p := range s.Phases {
		if phaseETA(p) <= 0 {
			continue
		}
		writes := false
		for _, w := range d.Writers {
			writes = writes || w == p.Name
		}
		if !found || (writes && !bestWrites) || (writes == bestWrites && phaseETA(p) > phaseETA(best)) {
			best, bestWrites, found = p, writes, true
		}
	}
	return best, found
}

// Pushed learns the outcome of a push of one condition; a resolution is
// not retried.
func (r *DiskRule) Pushed(a Alert, delivered bool, now time.Time) {
	ep := r.episodes[diskKey{a.Disk.Path, a.DiskKind}]
	if ep == nil || a.Status == Resolved {
		return
	}
	ep.pushed(delivered, now)
	if limit := r.cfg.Repeat; !delivered && limit > 0 && ep.backoff > limit {
		ep.backoff, ep.retryAt = limit, now.Add(limit)
	}
}

// State is armed while no condition of any disk is met; Since is when the
// earliest current one began.
func (r *DiskRule) State() RuleState {
	st := RuleState{Name: r.Name(), Armed: true}
	for _, ep := range r.episodes {
		if ep.disarmed && (st.Armed || ep.began.Before(st.Since)) {
			st.Armed, st.Since = false, ep.began
		}
		st.Undelivered = st.Undelivered || ep.undelivered()
	}
	return st
}

// DiskShort lists the conditions of d that are met now, of those that need
// no phase (save, floor, inodes), judged as the disk rule judges them: the
// status page marks what the phone is told.
func DiskShort(d Disk, minFree MinFree) []DiskKind {
	r := DiskRule{cfg: DiskConfig{MinFree: minFree}}
	var out []DiskKind
	for _, kind := range []DiskKind{DiskSave, DiskFloor, DiskInodes} {
		if kind == DiskSave && d.Saving {
			continue
		}
		if v, _, _ := r.need(kind, d, Sample{}); v >= 1 {
			out = append(out, kind)
		}
	}
	return out
}
