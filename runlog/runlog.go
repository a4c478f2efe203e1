// Package runlog keeps one small, always-readable file per training run.
//
// A run log never grows past its cap: before an append would overflow, the
// middle of the file is compacted into a single marker line. Appends are one
// write(2) on an O_APPEND file and compaction is an atomic rename, both under
// a cross-process lock on the log directory, so several processes may write
// the same run and a reader never sees a torn line or an oversized file.
//
// A run is created complete or not at all (temp file, fsync, rename) and
// the one-line file CurrentFile, replaced in the same step, names it: the
// current run is the one created last, not the one whose local-time name
// sorts last. Titles carry their zone's offset and entries are stamped in
// it. Nothing in the logs dir is opened unless it is a regular file (a
// directory for the dir itself), and nothing is read past a bound.
//
// Besides run logs, the package holds the few helpers its own files need
// and other writers of the logs dir share, so that every file there obeys
// the same rules: WriteFileAtomic (the exporter saves its phase table
// beside the run log with it), ReadRegularFile and MoveAside (files.go),
// and Truncate, which bounds every line of a run log; the bridge clips its
// push texts with it because each push becomes a BARK line. They stay here
// rather than in a package of their own because runlog imports nothing of
// lavender's (see internal/layout). The throttling of failed-write log
// lines lives in internal/throttle, and the metric that counts them in
// cmd/lavender, which hands each writer its series.
package runlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// DefaultDir is where run logs go unless configured otherwise.
	DefaultDir = "logs"
	// DefaultMaxBytes is the predecessor's hard cap.
	DefaultMaxBytes = 1024
	// MinMaxBytes is the smallest cap that still holds a full header, a
	// marker and one maximal entry.
	MinMaxBytes = 256
	// RunStart is the entry that opens a run, as in the predecessor's log.
	RunStart = "RUN start"
	// RunStop and RunResume mark where a process that writes the run
	// (serve) stopped and where it came back with --run.resume.
	RunStop   = "RUN stop"
	RunResume = "RUN resume"
	// CurrentFile names the pointer to the current run in the logs dir. It
	// holds the run log's base name and is replaced atomically, under the
	// directory lock, each time a run is created; so the current run is the
	// one created last, whatever the zone or clock of the process that
	// named it.
	CurrentFile = "current"
)

// ErrNoRun is returned by Current when the directory holds no run log.
var ErrNoRun = errors.New("no run log yet")

var nameRE = regexp.MustCompile(`^run-(\d{8}-\d{6})(?:-(\d+))?\.log$`)

// Options locate and bound run logs.
type Options struct {
	Dir      string // default DefaultDir
	MaxBytes int    // default DefaultMaxBytes; at least MinMaxBytes
	// Now is the clock; tests set it. Default time.Now.
	Now func() time.Time
	// Logger hears about damaged files moved aside; default none.
	Logger *slog.Logger
}

// CheckMaxBytes says why n cannot cap a run log, or nil. It is the one
// check of the cap: the command line names its flag before the message.
func CheckMaxBytes(n int) error {
	if n < MinMaxBytes {
		return fmt.Errorf("must be at least %d, not %d", MinMaxBytes, n)
	}
	return nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if err := CheckMaxBytes(o.MaxBytes); err != nil {
		return o, fmt.Errorf("runlog: max bytes %w", err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Log is a handle on one run's file. It is safe for concurrent use, and
// other processes may hold handles on the same file.
type Log struct {
	path     string
	dir      string
	maxBytes int
	now      func() time.Time
	logger   *slog.Logger

	mu sync.Mutex // serialises this process's goroutines; flock serialises processes
}

// New starts a run: it creates <dir>/run-YYYYMMDD-HHMMSS.log (with -2, -3, …
// on a name collision) holding the title line and, if header is not empty,
// "# header". It creates dir if needed.
func New(opts Options, header string) (*Log, error) {
	l, _, err := create(opts, header, "", false)
	return l, err
}

// maxNameCollisions bounds the -2, -3, … suffixes tried for one second.
const maxNameCollisions = 10000

// create writes a new run complete or not at all: the file is written and
// fsynced under a temporary name, as is the pointer to it (CurrentFile),
// and both are renamed into place under the directory lock. A reader never
// sees an empty or half-written run, and a full disk leaves no run behind.
// With unlessCurrent, a run found under the lock is opened instead
// (started false): writers that each found no run, at once, share the one
// the first of them starts.
func create(opts Options, header, first string, unlessCurrent bool) (l *Log, started bool, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("runlog: create dir %s: %w", opts.Dir, err)
	}
	unlock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	if unlessCurrent {
		path, err := CurrentPath(opts.Dir)
		if err == nil {
			return newLog(opts, path), false, nil
		}
		if !errors.Is(err, ErrNoRun) {
			return nil, false, err
		}
	}

	now := opts.Now()
	f := &File{Header: []string{titleLine(now)}}
	if header != "" {
		f.Header = append(f.Header, headerLine(header))
	}
	if first != "" {
		f.First = entryLine(opts.Now().In(zoneOf(f.Header[0], now)), first)
	}
	base := "run-" + now.Format("20060102-150405")
	var name, path string
	for seq := 1; ; seq++ {
		if seq > maxNameCollisions {
			return nil, false, fmt.Errorf("runlog: create %s: %d runs already started in that second", filepath.Join(opts.Dir, base+".log"), maxNameCollisions)
		}
		name = base + ".log"
		if seq > 1 {
			name = base + "-" + strconv.Itoa(seq) + ".log"
		}
		path = filepath.Join(opts.Dir, name)
		_, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return nil, false, fmt.Errorf("runlog: create %s: %w", path, err)
		}
	}
	runTmp, err := writeTemp(path, f.Bytes())
	if err != nil {
		return nil, false, fmt.Errorf("runlog: create %s: %w", path, err)
	}
	defer os.Remove(runTmp) // no-op after the rename
	pointer := filepath.Join(opts.Dir, CurrentFile)
	pointerTmp, err := writeTemp(pointer, []byte(name+"\n"))
	if err != nil {
		return nil, false, fmt.Errorf("runlog: create %s: %w", path, err)
	}
	defer os.Remove(pointerTmp)
	if err := os.Rename(runTmp, path); err != nil {
		return nil, false, fmt.Errorf("runlog: create %s: %w", path, err)
	}
	if err := os.Rename(pointerTmp, pointer); err != nil {
		os.Remove(path) // not current, so not a run: take it back
		return nil, false, fmt.Errorf("runlog: create %s: %w", path, err)
	}
	syncDir(opts.Dir)
	return newLog(opts, path), true, nil
}

// Current opens the newest run log in the directory, or returns ErrNoRun.
func Current(opts Options) (*Log, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	path, err := CurrentPath(opts.Dir)
	if err != nil {
		return nil, err
	}
	return newLog(opts, path), nil
}

// Start starts a run as New does, with first as its first entry, e.g.
// "RUN start  device=cuda", in the same atomic write.
func Start(opts Options, header, first string) (*Log, error) {
	if first == "" {
		first = RunStart
	}
	l, _, err := create(opts, header, first, false)
	return l, err
}

// CurrentOrStart opens the newest run log, or starts one as Start does if
// the directory has none.
func CurrentOrStart(opts Options, header, first string) (l *Log, started bool, err error) {
	l, err = Current(opts)
	if errors.Is(err, ErrNoRun) {
		if first == "" {
			first = RunStart
		}
		// Another writer may start one first: create looks again under
		// the directory lock.
		return create(opts, header, first, true)
	}
	return l, false, err
}

// AppendCurrent appends msg to the newest run in opts.Dir, starting a run
// (with "RUN start") if there is none. Writers that outlive a run, such as
// the bridge, use it so they follow a new run started by another process.
func AppendCurrent(opts Options, msg string) error {
	l, _, err := CurrentOrStart(opts, "", RunStart)
	if err != nil {
		return err
	}
	return l.Append(msg)
}

// CurrentPath returns the path of the current run log in dir: the one
// CurrentFile names, which is the run created last. A dir without a usable
// pointer (written by an older lavender, or the run it names was deleted)
// falls back to the newest name: runs ordered by the time in their name,
// then by their collision suffix.
func CurrentPath(dir string) (string, error) {
	if dir == "" {
		dir = DefaultDir
	}
	if data, err := ReadRegularFile(filepath.Join(dir, CurrentFile), 256); err == nil {
		name := strings.TrimSpace(string(data))
		if nameRE.MatchString(name) {
			// Whatever now sits at that name is the current run; an odd file
			// there is moved aside by the next append.
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				return filepath.Join(dir, name), nil
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("runlog: %s: %w", dir, ErrNoRun)
	}
	if err != nil {
		return "", fmt.Errorf("runlog: read dir %s: %w", dir, err)
	}
	type run struct {
		name  string
		stamp string
		seq   int
	}
	var runs []run
	for _, e := range entries {
		m := nameRE.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		seq := 1
		if m[2] != "" {
			seq, _ = strconv.Atoi(m[2])
		}
		runs = append(runs, run{e.Name(), m[1], seq})
	}
	if len(runs) == 0 {
		return "", fmt.Errorf("runlog: %s: %w", dir, ErrNoRun)
	}
	sort.Slice(runs, func(i, j int) bool {
		if runs[i].stamp != runs[j].stamp {
			return runs[i].stamp < runs[j].stamp
		}
		return runs[i].seq < runs[j].seq
	})
	return filepath.Join(dir, runs[len(runs)-1].name), nil
}

// Open returns a handle on an existing run log at path.
func Open(opts Options, path string) (*Log, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("runlog: open %s: %w", path, err)
	}
	return newLog(opts, path), nil
}

func newLog(opts Options, path string) *Log {
	return &Log{path: path, dir: filepath.Dir(path), maxBytes: opts.MaxBytes, now: opts.Now, logger: opts.Logger}
}

// Path is the file's path.
func (l *Log) Path() string { return l.path }

// Read returns the file's content, or its last MaxBytes from the start of
// a line if it is larger (lavender never makes it so; the next append
// repairs it). It refuses anything but a regular file, without blocking.
func (l *Log) Read() ([]byte, error) {
	fh, st, err := openRegular(l.path, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("runlog: read %s: %w", l.path, err)
	}
	defer fh.Close()
	limit := int64(l.maxBytes)
	if st.Size() <= limit {
		data, err := io.ReadAll(io.LimitReader(fh, limit))
		if err != nil {
			return nil, fmt.Errorf("runlog: read %s: %w", l.path, err)
		}
		return data, nil
	}
	// One byte more than the cap tells whether the window starts a line.
	data := make([]byte, limit+1)
	n, err := fh.ReadAt(data, st.Size()-limit-1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("runlog: read %s: %w", l.path, err)
	}
	data = data[:n]
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		data = data[i+1:]
	} else {
		data = data[1:]
	}
	return data, nil
}

// Append writes one entry, "HH:MM:SS msg", compacting the file first if the
// entry would not fit under the cap. The message is kept to one line and
// clipped to MaxLineBytes, and stamped in the zone the file's title names.
// A file that is not exactly what lavender writes is repaired first; one
// that is not a regular file is moved aside. Callers should log an error
// and carry on: a run log is a record, never a reason to stop training.
func (l *Log) Append(msg string) error {
	now := l.now()

	l.mu.Lock()
	defer l.mu.Unlock()
	unlock, err := lockDir(l.dir)
	if err != nil {
		return err
	}
	defer unlock()

	fh, st, err := openRegular(l.path, os.O_RDWR|os.O_APPEND)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return l.rewrite(nil, nil, msg, now, time.Time{})
	case errors.Is(err, ErrNotRegular):
		aside, merr := MoveAside(l.path)
		if merr != nil {
			return fmt.Errorf("runlog: append %s: %w (and %v)", l.path, err, merr)
		}
		l.logger.Error("run log was not a regular file; moved aside, the run goes on in a new file", "path", l.path, "moved_to", aside, "err", err)
		return l.rewrite(nil, nil, msg, now, time.Time{})
	case err != nil:
		return fmt.Errorf("runlog: append %s: %w", l.path, err)
	}
	defer fh.Close()
	var whole []byte // the whole file when it was read here, so rewrite need not read it again
	if st.Size() <= int64(l.maxBytes) {
		data := make([]byte, st.Size())
		n, err := fh.ReadAt(data, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("runlog: append %s: %w", l.path, err)
		}
		if int64(n) == st.Size() {
			whole = data
		}
		// Only a file that parses is appended to, so any damage is
		// repaired by the first append after it.
		if f, perr := Parse(data[:n]); perr == nil && whole != nil {
			line := entryLine(now.In(zoneOf(f.Header[0], now)), msg) + "\n"
			if n+len(line) <= l.maxBytes {
				if _, err := fh.Write([]byte(line)); err != nil {
					return fmt.Errorf("runlog: append %s: %w", l.path, err)
				}
				return nil
			}
		}
	}
	return l.rewrite(fh, whole, msg, now, st.ModTime())
}

// readForRepair reads what a repair needs from fh, bounded whatever its
// size: all of it up to twice the repair limit, else the first and the last
// limit bytes (on line boundaries) and a count of the lines in between,
// read in small chunks and never held.
func readForRepair(fh *os.File, limit int64) (data []byte, middle uint64, err error) {
	st, err := fh.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := st.Size()
	if size <= 2*limit {
		data, err = io.ReadAll(io.LimitReader(io.NewSectionReader(fh, 0, 2*limit), 2*limit))
		return data, 0, err
	}
	head := make([]byte, limit)
	if _, err := fh.ReadAt(head, 0); err != nil {
		return nil, 0, err
	}
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
		head = head[:i+1]
	}
	tail := make([]byte, limit)
	tailStart := size - limit
	if _, err := fh.ReadAt(tail, tailStart); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i+1 < len(tail) {
		tail, tailStart = tail[i+1:], tailStart+int64(i+1)
	}
	buf := make([]byte, 64<<10)
	for off := int64(len(head)); off < tailStart; {
		n, err := fh.ReadAt(buf[:min(int64(len(buf)), tailStart-off)], off)
		middle += uint64(bytes.Count(buf[:n], []byte{'\n'}))
		off += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, 0, err
		}
	}
	if len(head) > 0 && head[len(head)-1] != '\n' {
		head = append(head, '\n')
	}
	return append(head, tail...), middle, nil
}

// rewrite repairs and compacts the file with msg appended and atomically
// replaces it. fh is the open file, nil if there is none to keep; whole is
// its content if the caller has already read all of it, else nil. The
// caller holds the locks.
func (l *Log) rewrite(fh *os.File, whole []byte, msg string, now, modTime time.Time) error {
	data := whole
	var middle uint64
	if fh != nil && whole == nil {
		var err error
		// The cap plus a margin of one cap: enough for any file lavender
		// wrote under a cap up to twice this one.
		if data, middle, err = readForRepair(fh, 2*int64(l.maxBytes)); err != nil {
			return fmt.Errorf("runlog: compact %s: %w", l.path, err)
		}
	}
	started := startedAt(filepath.Base(l.path), modTime)
	f := salvage(data, started, now)
	if middle > 0 {
		m := Marker{Dropped: middle}
		if f.Marker != nil {
			m = Marker{Dropped: f.Marker.Dropped + middle, Rounds: f.Marker.Rounds}
		}
		f.Marker = &m
	}
	compact(f, entryLine(now.In(zoneOf(f.Header[0], now)), msg), l.maxBytes)
	if err := WriteFileAtomic(l.path, f.Bytes()); err != nil {
		return fmt.Errorf("runlog: compact %s: %w", l.path, err)
	}
	return nil
}

// compact adds entry to f, dropping middle entries if the result would
// exceed maxBytes. The kept tail is as many of the newest entries as fit in
// half the cap; the first entry goes only if the cap is too small for it.
func compact(f *File, entry string, maxBytes int) {
	if f.First == "" && f.Marker == nil {
		f.First = entry // salvage leaves First empty only for a run with no entries
	} else {
		f.Entries = append(f.Entries, entry)
	}
	if len(f.Bytes()) <= maxBytes {
		return // a repaired header, nothing to drop
	}

	older := f.Entries[:len(f.Entries)-1]
	marker := Marker{Rounds: 1}
	if f.Marker != nil {
		marker = Marker{Dropped: f.Marker.Dropped, Rounds: f.Marker.Rounds + 1}
	}
	// Size the marker as if every older entry were dropped, so its counter
	// can only come out shorter than reserved.
	widest := Marker{Dropped: marker.Dropped + uint64(len(older)) + 1, Rounds: marker.Rounds}
	fixed := lineBytes(f.Header) + lineBytes([]string{f.First, entry}) + len(widest.String()) + 1
	budget := min(maxBytes/2, maxBytes-fixed)
	keep, used := 0, len(entry)+1
	for i := len(older) - 1; i >= 0 && used+len(older[i])+1 <= budget; i-- {
		used += len(older[i]) + 1
		keep++
	}
	dropped := len(older) - keep
	marker.Dropped += uint64(dropped)
	f.Entries = append(older[dropped:len(older):len(older)], entry)
	f.Marker = &marker

	// Only a cap near the minimum, or a marker with absurd counters from a
	// hand-edited file, gets past here: give up the first entry, then the
	// header text, but never the title or the newest entry.
	if len(f.Bytes()) > maxBytes && f.First != "" {
		f.First = ""
		marker.Dropped++
	}
	for len(f.Bytes()) > maxBytes && len(f.Entries) > 1 {
		f.Entries = f.Entries[1:]
		marker.Dropped++
	}
	if len(f.Bytes()) > maxBytes && len(f.Header) > 1 {
		f.Header = f.Header[:1]
	}
}

func lineBytes(lines []string) int {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	return n
}

// startedAt recovers a run's start from its file name, for restoring a lost
// title; a foreign name falls back to the file's modification time.
func startedAt(name string, modTime time.Time) time.Time {
	if m := nameRE.FindStringSubmatch(name); m != nil {
		if t, err := time.ParseInLocation("20060102-150405", m[1], time.Local); err == nil {
			return t
		}
	}
	if modTime.IsZero() {
		return time.Now()
	}
	return modTime
}

// WriteFileAtomic replaces path with data: temp file in the same dir,
// fsync, rename, then fsync the dir so the rename itself survives a crash.
// A reader sees the old content or the new, never a mix. The exporter saves
// its phase table beside the run log the same way.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // no-op after a successful rename
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// writeTemp writes data, fsynced and mode 0644, to a new hidden file beside
// path (".name.tmp-*", which no reader takes for a run) and returns its
// name. The caller renames or removes it.
func writeTemp(path string, data []byte) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	err = tmp.Chmod(0o644)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

func syncDir(dir string) {
	if d, err := openDir(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// openDir opens dir only if it is a directory: O_DIRECTORY fails on
// anything else before it is opened, so a FIFO in its place cannot block.
func openDir(dir string) (*os.File, error) {
	return os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
}

// lockDir takes an exclusive flock on the directory itself, so no lock file
// is needed and a read-only directory can still be locked.
func lockDir(dir string) (unlock func(), err error) {
	d, err := openDir(dir)
	if err != nil {
		return nil, fmt.Errorf("runlog: lock %s: %w", dir, err)
	}
	for {
		err = syscall.Flock(int(d.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("runlog: lock %s: %w", dir, err)
	}
	return func() {
		_ = syscall.Flock(int(d.Fd()), syscall.LOCK_UN)
		d.Close()
	}, nil
}
