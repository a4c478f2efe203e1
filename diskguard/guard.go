// Package diskguard watches the filesystems a training run writes to: the
// paths it is given, and the directories its writers (the run's phases)
// report. It reads each with statfs off its own goroutines, with a deadline
// and at most one call outstanding per path, so a hung network filesystem
// is reported as unreadable instead of stalling anyone; it watches a
// filesystem once, however many paths lead to it; and it learns, from the
// readings, how large a checkpoint save is and how fast the filesystem
// fills. It knows paths, statfs and numbers: what to push about them is
// the watchdog's business.
package diskguard

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

const (
	// DefaultTimeout bounds one statfs call. A local filesystem answers in
	// microseconds; one that takes seconds is hung (an NFS server gone).
	DefaultTimeout = 2 * time.Second
	// DefaultRateWindow is how far back the fill rate looks.
	DefaultRateWindow = 30 * time.Minute
	// MaxWriterFilesystems bounds the filesystems taken from writers'
	// directories, and so the path label's values: 64 phases of 8
	// directories each could otherwise be 512 series per metric. Paths on
	// a filesystem already watched cost nothing against it.
	MaxWriterFilesystems = 32
	// savesKept is how many saves the size of a save is taken from: the
	// largest of the last few, as a save's size only grows with the model.
	savesKept = 3
)

// Stat is one reading of a filesystem.
type Stat struct {
	Dev       uint64 // st_dev of the path: the filesystem's identity
	Size      uint64 // bytes: f_blocks × f_frsize
	Free      uint64 // bytes free, the root-reserved ones included: f_bfree × f_frsize
	Avail     uint64 // bytes an unprivileged writer may still use: f_bavail × f_frsize
	Files     uint64 // inodes; 0 on filesystems that have no fixed number (btrfs)
	FilesFree uint64 // free inodes
}

// Used is the bytes in use: size less free.
func (s Stat) Used() uint64 {
	if s.Free > s.Size {
		return 0
	}
	return s.Size - s.Free
}

// StatFunc reads the filesystem path leads to; Statfs is the real one. A
// path that does not exist is an error wrapping fs.ErrNotExist.
type StatFunc func(path string) (Stat, error)

// PathError is a failed stat or statfs of a path.
type PathError struct {
	Op, Path string
	Err      error
}

func (e *PathError) Error() string { return e.Op + " " + e.Path + ": " + e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

// Writer is something that writes into directories, and may say how large
// its saves are: a phase of the run.
type Writer struct {
	Name string
	// Dirs are absolute directories it writes to. Its saves go to the
	// filesystem of the last one: clients list the working directory
	// first and the checkpoint directory (output_dir, default_root_dir)
	// after it.
	Dirs []string
	// SavedAt is when it last reported a save (zero: never), SaveBytes
	// that save's size. A later SavedAt is a new report.
	SavedAt   time.Time
	SaveBytes uint64
	// Ended is true once it has stopped writing (a phase that ended): its
	// directories are released, leaving room for the running ones'.
	Ended bool
	// Started orders the running writers when their filesystems are more
	// than MaxWriterFilesystems: the newest are watched first.
	Started time.Time
}

// Config wires a Guard.
type Config struct {
	// Paths are always watched, in this order (--watchdog.disk, then
	// /dev/shm). Each must be absolute.
	Paths []string
	// Writers returns the writers whose directories are watched too; nil:
	// none. It must not block.
	Writers func() []Writer
	Stat    StatFunc      // default Statfs
	Timeout time.Duration // bound of one statfs; default DefaultTimeout
	// RateWindow is how far back the fill rate looks; default
	// DefaultRateWindow. The rate is known once a third of it is covered.
	RateWindow time.Duration
	Now        func() time.Time // default time.Now; stamps readings and the rate's points
	Logger     *slog.Logger     // nil: discard
}

// Filesystem is one watched filesystem as the last poll read it.
type Filesystem struct {
	// Path names it, as the metrics' path label and the watchdog's key:
	// when it is first read, the first watched path that leads to it (a
	// fixed path before the writers' directories); from then on the same
	// name for as long as it is read, though newer writers' directories
	// come before it in Paths or the writer whose directory named it has
	// ended. A name changed whenever a writer started would end every
	// series of the filesystem and restart the alerts on them. Paths are
	// the watched paths that lead to it now, in order: Path is not always
	// among them.
	Path  string
	Paths []string
	Stat  Stat
	// Writers are the names of the writers with a directory on it.
	Writers []string
	// SaveBytes is the size of one checkpoint save onto it, 0 while
	// unknown. SaveReported says it comes from writers' reports rather
	// than from the jumps of its used bytes.
	SaveBytes    uint64
	SaveReported bool
	// Saving is true while its used bytes jump: a save (or a copy) is
	// being written, and what is free is not yet what it leaves.
	Saving bool
	// Rate is how fast its used bytes grew, in bytes per second, over the
	// last RateSpan (up to the rate window); RateSpan is 0 while too
	// little is known. A negative rate is a filesystem being emptied.
	Rate     float64
	RateSpan time.Duration
}

// Unreadable is a watched path whose statfs failed or did not answer.
type Unreadable struct {
	Path  string
	Err   string
	Hung  bool      // statfs did not answer within the timeout (or still hangs)
	Since time.Time // when it first failed in this stretch
}

// NotWatched is a running writer's directory the guard leaves out, and why.
type NotWatched struct {
	Path    string
	Writers []string // the writers that reported it
	Reason  string
}

// Snapshot is what the last poll found.
type Snapshot struct {
	At          time.Time
	Filesystems []Filesystem
	Unreadable  []Unreadable
	Missing     []string     // watched paths that do not exist yet
	NotWatched  []NotWatched // writers' directories over MaxWriterFilesystems
}

// Guard polls the watched paths. It is safe for concurrent use.
type Guard struct {
	cfg    Config
	static []string

	mu        sync.Mutex // one poll at a time
	probes    map[string]*probe
	trackers  map[uint64]*tracker
	seenSaves map[string]time.Time // per writer: its SavedAt when last looked at
	devs      map[string]uint64    // per watched path: the device it last read as
	names     map[uint64]string    // per filesystem read in the last poll: its Path
	capHeld   string               // the paths the cap left out, as last logged

	viewMu sync.Mutex // guards view alone: readers never wait behind a poll
	view   Snapshot
}

// probe is the statfs of one path; at most one call is outstanding, so a
// path whose calls hang costs one goroutine, not one per poll.
type probe struct {
	ch    chan result // capacity 1: a late answer never blocks its goroutine
	busy  bool
	state pathState
	since time.Time // when the current state began
}

type result struct {
	st  Stat
	err error
}

type pathState int

const (
	stateNew pathState = iota
	stateOK
	stateMissing
	stateUnreadable
)

// New checks cfg and returns a Guard that has not polled yet.
func New(cfg Config) (*Guard, error) {
	if cfg.Stat == nil {
		cfg.Stat = Statfs
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("diskguard: statfs timeout must be positive, not %s", cfg.Timeout)
	}
	if cfg.RateWindow == 0 {
		cfg.RateWindow = DefaultRateWindow
	}
	if cfg.RateWindow < 0 {
		return nil, fmt.Errorf("diskguard: rate window must be positive, not %s", cfg.RateWindow)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Guard{cfg: cfg, probes: map[string]*probe{}, trackers: map[uint64]*tracker{}, seenSaves: map[string]time.Time{}, devs: map[string]uint64{},
		names: map[uint64]string{}}
	for _, p := range cfg.Paths {
		if p == "" || !filepath.IsAbs(p) {
			return nil, fmt.Errorf("disk path %q is not absolute", p)
		}
		if p = filepath.Clean(p); !slices.Contains(g.static, p) {
			g.static = append(g.static, p)
		}
	}
	return g, nil
}

// Run polls every interval until ctx ends. Callers make the first poll
// themselves with Poll.
func (g *Guard) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.Poll(ctx)
		}
	}
}

// Latest returns what the last poll found, without waiting for a poll.
func (g *Guard) Latest() Snapshot {
	g.viewMu.Lock()
	defer g.viewMu.Unlock()
	return g.view
}

// Poll reads every watched path once and returns what it found. It waits
// at most the timeout for the calls it starts; a path whose earlier call
// still hangs is not called again, and is reported unreadable until the
// call returns.
func (g *Guard) Poll(ctx context.Context) Snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	paths, writers, owners, notWatched := g.paths()

	fresh := map[string]bool{}
	for _, path := range paths {
		p := g.probes[path]
		if p == nil {
			p = &probe{ch: make(chan result, 1)}
			g.probes[path] = p
		}
		if !p.busy {
			p.busy, fresh[path] = true, true
			go func() {
				st, err := g.cfg.Stat(path)
				p.ch <- result{st, err}
			}()
		}
	}
	results := g.collect(ctx, paths, fresh)
	for path, p := range g.probes {
		if !p.busy && !slices.Contains(paths, path) {
			delete(g.probes, path) // a busy one stays, so no second call starts
		}
	}

	snap := Snapshot{At: now, NotWatched: notWatched}
	byDev := map[uint64]int{}
	pathDev := map[string]uint64{}
	for _, path := range paths {
		p := g.probes[path]
		r, ok := results[path]
		switch {
		case !ok:
			// An unreadable path counts against the cap again, so that a
			// filesystem that hangs keeps at most the cap's worth of
			// paths (calls, threads, error series) unreadable.
			delete(g.devs, path)
			g.transition(path, p, stateUnreadable, now, nil)
			snap.Unreadable = append(snap.Unreadable, Unreadable{Path: path, Since: p.since, Hung: true,
				Err: fmt.Sprintf("statfs did not answer within %s", g.cfg.Timeout)})
		case errors.Is(r.err, fs.ErrNotExist):
			delete(g.devs, path)
			g.transition(path, p, stateMissing, now, r.err)
			snap.Missing = append(snap.Missing, path)
		case r.err != nil:
			delete(g.devs, path)
			g.transition(path, p, stateUnreadable, now, r.err)
			snap.Unreadable = append(snap.Unreadable, Unreadable{Path: path, Since: p.since, Err: r.err.Error()})
		default:
			g.transition(path, p, stateOK, now, nil)
			pathDev[path], g.devs[path] = r.st.Dev, r.st.Dev
			i, seen := byDev[r.st.Dev]
			if !seen {
				i = len(snap.Filesystems)
				byDev[r.st.Dev] = i
				snap.Filesystems = append(snap.Filesystems, Filesystem{Path: path, Stat: r.st})
			}
			f := &snap.Filesystems[i]
			f.Paths = append(f.Paths, path)
			for _, w := range owners[path] {
				if !slices.Contains(f.Writers, w) {
					f.Writers = append(f.Writers, w)
				}
			}
		}
	}
	for path := range g.devs {
		if !slices.Contains(paths, path) {
			delete(g.devs, path)
		}
	}
	g.name(snap.Filesystems, paths, pathDev)
	g.learn(snap.Filesystems, writers, pathDev, now)
	g.viewMu.Lock()
	g.view = snap
	g.viewMu.Unlock()
	return snap
}

// name gives each filesystem read its Path: the name it had in the last
// poll, or else its first path. The name it had is given up only where it
// would contradict this poll, as a path watched now that reads as another
// filesystem, fails or is missing: its label would then be two series (or
// an error series beside the readings), or a row of the status page that
// says the path is missing beside one named by it. A kept name is so
// either read as its own filesystem in this poll or watched no more, and a
// new one is read as its own: no two filesystems share a name. A filesystem
// not read this poll loses its name: its series have ended anyway.
func (g *Guard) name(filesystems []Filesystem, paths []string, pathDev map[string]uint64) {
	names := map[uint64]string{}
	for i := range filesystems {
		f := &filesystems[i]
		dev := f.Stat.Dev
		name, had := g.names[dev]
		if d, read := pathDev[name]; !had || (read && d != dev) || (!read && slices.Contains(paths, name)) {
			name = f.Paths[0]
		}
		f.Path, names[dev] = name, name
	}
	g.names = names
}

// collect waits until the timeout for the calls started this poll, and
// takes whatever earlier calls have answered meanwhile without waiting.
func (g *Guard) collect(ctx context.Context, paths []string, fresh map[string]bool) map[string]result {
	timer := time.NewTimer(g.cfg.Timeout)
	defer timer.Stop()
	expired := false
	results := map[string]result{}
	for _, path := range paths {
		p := g.probes[path]
		var r result
		got := false
		if fresh[path] && !expired {
			select {
			case r = <-p.ch:
				got = true
			case <-timer.C:
				expired = true
			case <-ctx.Done():
				expired = true
			}
		}
		if !got {
			select {
			case r = <-p.ch:
				got = true
			default:
			}
		}
		if got {
			p.busy = false
			results[path] = r
		}
	}
	return results
}

// transition logs a path's change of state: the start's missing paths
// ("watched once it appears"), appearing, failing and recovering.
func (g *Guard) transition(path string, p *probe, to pathState, now time.Time, err error) {
	from := p.state
	if from == to {
		return
	}
	p.state, p.since = to, now
	log := g.cfg.Logger
	switch {
	case to == stateMissing && from == stateNew:
		log.Info("disk guard: path does not exist yet; it is watched once it appears", "path", path)
	case to == stateMissing:
		log.Warn("disk guard: path is gone; it is watched again once it reappears", "path", path)
	case to == stateUnreadable && err == nil:
		log.Warn("disk guard: statfs did not answer; the path is reported unreadable until it does, and is not called again meanwhile", "path", path, "timeout", g.cfg.Timeout)
	case to == stateUnreadable:
		log.Warn("disk guard: path unreadable", "path", path, "err", err)
	case from == stateMissing:
		log.Info("disk guard: path appeared; watching it", "path", path)
	case from == stateUnreadable:
		log.Info("disk guard: path readable again", "path", path)
	}
}

// paths lists the watched paths in order: the fixed ones, then the
// running writers' directories, newest writer first. Ended writers'
// directories are released. A directory on a filesystem already watched
// (its device known from an earlier reading) is watched at no cost; the
// others count against MaxWriterFilesystems until read, and those beyond
// it are notWatched. owners names the writers of each path.
func (g *Guard) paths() (paths []string, writers []Writer, owners map[string][]string, notWatched []NotWatched) {
	paths = slices.Clone(g.static)
	owners = map[string][]string{}
	if g.cfg.Writers != nil {
		writers = g.cfg.Writers()
	}
	var running []Writer
	for _, w := range writers {
		if !w.Ended {
			running = append(running, w)
		}
	}
	slices.SortStableFunc(running, func(a, b Writer) int { return b.Started.Compare(a.Started) })

	watched := map[uint64]bool{} // filesystems already watched, by device
	for _, p := range g.static {
		if dev, ok := g.devs[p]; ok {
			watched[dev] = true
		}
	}
	taken := 0 // filesystems taken from writers, counting each unread path as one
	left := map[string]int{}
	for _, w := range running {
		for _, d := range w.Dirs {
			if d == "" || !filepath.IsAbs(d) {
				continue
			}
			d = filepath.Clean(d)
			if i, ok := left[d]; ok {
				if !slices.Contains(notWatched[i].Writers, w.Name) {
					notWatched[i].Writers = append(notWatched[i].Writers, w.Name)
				}
				continue
			}
			if !slices.Contains(paths, d) {
				dev, known := g.devs[d]
				switch {
				case known && watched[dev]:
				case taken < MaxWriterFilesystems:
					taken++
					if known {
						watched[dev] = true
					}
				default:
					left[d] = len(notWatched)
					notWatched = append(notWatched, NotWatched{Path: d, Writers: []string{w.Name}, Reason: capReason})
					continue
				}
				paths = append(paths, d)
			}
			if !slices.Contains(owners[d], w.Name) {
				owners[d] = append(owners[d], w.Name)
			}
		}
	}
	g.logCap(notWatched)
	return paths, writers, owners, notWatched
}

// capReason is why a running writer's directory is not watched.
var capReason = fmt.Sprintf("phases write to more than %d filesystems; the newest running phases' are watched first", MaxWriterFilesystems)

// logCap says when the set of directories the cap leaves out changes, and
// when it is empty again; never once per poll.
func (g *Guard) logCap(notWatched []NotWatched) {
	var left []string
	for _, n := range notWatched {
		left = append(left, n.Path)
	}
	held := strings.Join(left, "\x00")
	if held == g.capHeld {
		return
	}
	g.capHeld = held
	if len(left) == 0 {
		g.cfg.Logger.Info("disk guard: every running phase's directory is watched again")
		return
	}
	shown := left[:min(len(left), 8)]
	g.cfg.Logger.Warn("disk guard: phases write to more filesystems than it watches; the newest running phases' are watched, these are not",
		"cap", MaxWriterFilesystems, "not_watched", len(left), "paths", strings.Join(shown, " "))
}
