package diskguard

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/lavender-ml/lavender/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

const (
	mib = 1 << 20
	gib = 1 << 30
)

// fakeFS is a statfs whose answers the test sets per path: a reading, an
// error, or a hang until released.
type fakeFS struct {
	mu    sync.Mutex
	stats map[string]Stat
	errs  map[string]error
	hang  map[string]chan struct{}
	calls map[string]int
}

func newFakeFS() *fakeFS {
	return &fakeFS{stats: map[string]Stat{}, errs: map[string]error{}, hang: map[string]chan struct{}{}, calls: map[string]int{}}
}

func (f *fakeFS) stat(path string) (Stat, error) {
	f.mu.Lock()
	f.calls[path]++
	h := f.hang[path]
	f.mu.Unlock()
	if h != nil {
		<-h
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs[path]; err != nil {
		return Stat{}, &PathError{Op: "statfs", Path: path, Err: err}
	}
	st, ok := f.stats[path]
	if !ok {
		return Stat{}, &PathError{Op: "stat", Path: path, Err: fs.ErrNotExist}
	}
	return st, nil
}

func (f *fakeFS) set(path string, st Stat) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats[path] = st
}

// setUsed sets the used bytes of the filesystem at path, keeping its size.
func (f *fakeFS) setUsed(path string, used uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stats[path]
	st.Free, st.Avail = st.Size-used, st.Size-used
	f.stats[path] = st
}

func (f *fakeFS) callsOf(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[path]
}

func disk(dev, size, used uint64) Stat {
	return Stat{Dev: dev, Size: size, Free: size - used, Avail: size - used, Files: 1000, FilesFree: 900}
}

type rig struct {
	t     *testing.T
	fs    *fakeFS
	clock *testkit.Clock
	g     *Guard
	log   *testkit.SyncBuffer
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	r := &rig{t: t, fs: newFakeFS(), clock: testkit.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), log: &testkit.SyncBuffer{}}
	cfg.Stat, cfg.Now = r.fs.stat, r.clock.Now
	cfg.Logger = slog.New(slog.NewTextHandler(r.log, nil))
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute // a fake that answers never waits for it
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.g = g
	return r
}

func (r *rig) poll() Snapshot {
	r.t.Helper()
	return r.g.Poll(r.t.Context())
}

func (r *rig) only(s Snapshot) Filesystem {
	r.t.Helper()
	if len(s.Filesystems) != 1 {
		r.t.Fatalf("%d filesystems, want 1: %+v", len(s.Filesystems), s)
	}
	return s.Filesystems[0]
}

// TestOneFilesystemWatchedOnce: paths that lead to one filesystem make one
// Filesystem, named by the first path given, whether they come from the
// flags or from writers.
func TestOneFilesystemWatchedOnce(t *testing.T) {
	r := newRig(t, Config{
		Paths: []string{"/data", "/dev/shm", "/data/"},
		Writers: func() []Writer {
			return []Writer{{Name: "Pretrain", Dirs: []string{"/home/u/run", "/data/out"}}, {Name: "Eval", Dirs: []string{"/data/out"}}}
		},
	})
	r.fs.set("/data", disk(1, 100*gib, 10*gib))
	r.fs.set("/data/out", disk(1, 100*gib, 10*gib))
	r.fs.set("/home/u/run", disk(2, 50*gib, 1*gib))
	r.fs.set("/dev/shm", disk(3, 64*mib, 0))
	s := r.poll()
	if len(s.Filesystems) != 3 {
		t.Fatalf("filesystems %+v, want 3", s.Filesystems)
	}
	want := []struct {
		path    string
		paths   []string
		writers []string
	}{
		{"/data", []string{"/data", "/data/out"}, []string{"Pretrain", "Eval"}},
		{"/dev/shm", []string{"/dev/shm"}, nil},
		{"/home/u/run", []string{"/home/u/run"}, []string{"Pretrain"}},
	}
	for i, w := range want {
		f := s.Filesystems[i]
		if f.Path != w.path || strings.Join(f.Paths, ",") != strings.Join(w.paths, ",") || strings.Join(f.Writers, ",") != strings.Join(w.writers, ",") {
			t.Errorf("filesystem %d: %s %v %v, want %s %v %v", i, f.Path, f.Paths, f.Writers, w.path, w.paths, w.writers)
		}
	}
	if n := r.fs.callsOf("/data"); n != 1 {
		t.Errorf("/data given twice was read %d times in one poll", n)
	}
}

// TestFilesystemKeepsItsNameWhileWatched: a filesystem that a phase's
// directory named keeps that name, in Path and in every metric's path
// label, when a newer phase starts writing to it and when the phase that
// named it ends; once nothing reads it, the next phase names it afresh.
func TestFilesystemKeepsItsNameWhileWatched(t *testing.T) {
	var mu sync.Mutex
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ws := []Writer{{Name: "sft", Dirs: []string{"/data/sft"}, Started: t0}}
	setWriters := func(w ...Writer) { mu.Lock(); defer mu.Unlock(); ws = w }
	r := newRig(t, Config{Paths: []string{"/"}, Writers: func() []Writer { mu.Lock(); defer mu.Unlock(); return slices.Clone(ws) }})
	r.fs.set("/", disk(1, 100*gib, 10*gib))
	for _, d := range []string{"/data/sft", "/data/eval", "/data/dpo"} {
		r.fs.set(d, disk(2, 100*gib, 99*gib))
	}
	data := func(s Snapshot) Filesystem {
		t.Helper()
		for _, f := range s.Filesystems {
			if f.Stat.Dev == 2 {
				return f
			}
		}
		t.Fatalf("/data's filesystem not read: %+v", s)
		return Filesystem{}
	}
	labelled := func(path string) {
		t.Helper()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(r.g.Collector())
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range families {
			var labels []string
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetValue())
				}
			}
			if mf.GetName() != "lavender_disk_unwatched_paths" && strings.Join(labels, ",") != "/,"+path {
				t.Errorf("%s labelled %v, want / and %s", mf.GetName(), labels, path)
			}
		}
	}

	if f := data(r.poll()); f.Path != "/data/sft" {
		t.Fatalf("named %q, want /data/sft", f.Path)
	}
	sft := ws[0]
	eval := Writer{Name: "eval", Dirs: []string{"/data/eval"}, Started: t0.Add(time.Hour)}
	setWriters(sft, eval)
	for range 2 {
		if f := data(r.poll()); f.Path != "/data/sft" || strings.Join(f.Paths, ",") != "/data/eval,/data/sft" {
			t.Fatalf("with a newer phase on it: named %q by %v, want /data/sft by /data/eval,/data/sft", f.Path, f.Paths)
		}
	}
	labelled("/data/sft")

	sft.Ended = true
	setWriters(sft, eval)
	if f := data(r.poll()); f.Path != "/data/sft" || strings.Join(f.Paths, ",") != "/data/eval" {
		t.Fatalf("once the phase that named it ended: named %q by %v, want /data/sft by /data/eval", f.Path, f.Paths)
	}
	labelled("/data/sft")

	eval.Ended = true
	setWriters(sft, eval)
	if s := r.poll(); len(s.Filesystems) != 1 {
		t.Fatalf("with no phase on /data: %+v", s.Filesystems)
	}
	setWriters(sft, eval, Writer{Name: "dpo", Dirs: []string{"/data/dpo"}, Started: t0.Add(2 * time.Hour)})
	if f := data(r.poll()); f.Path != "/data/dpo" {
		t.Errorf("watched again after a gap: named %q, want /data/dpo", f.Path)
	}
}

// TestFixedPathNamesItsFilesystem: a fixed path names its filesystem
// before any phase's directory on it, and keeps naming it when a phase
// starts writing there.
func TestFixedPathNamesItsFilesystem(t *testing.T) {
	var ws []Writer
	r := newRig(t, Config{Paths: []string{"/data"}, Writers: func() []Writer { return slices.Clone(ws) }})
	r.fs.set("/data", disk(1, gib, 0))
	r.fs.set("/data/run", disk(1, gib, 0))
	ws = []Writer{{Name: "Train", Dirs: []string{"/data/run"}}}
	for range 2 {
		if f := r.only(r.poll()); f.Path != "/data" || strings.Join(f.Paths, ",") != "/data,/data/run" {
			t.Fatalf("named %q by %v, want /data", f.Path, f.Paths)
		}
	}
}

// TestFilesystemGivesUpANameThePollContradicts: a kept name whose path
// now fails, is gone or leads to another filesystem gives way to a path
// that reads as the filesystem, so no label is ever two series (which would
// fail the whole scrape) and no row is named by a path shown missing.
func TestFilesystemGivesUpANameThePollContradicts(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ws := []Writer{{Name: "a", Dirs: []string{"/data/a"}, Started: t0}}
	r := newRig(t, Config{Writers: func() []Writer { return slices.Clone(ws) }})
	r.fs.set("/data/a", disk(2, gib, 0))
	r.fs.set("/data/b", disk(2, gib, 0))
	r.poll()
	ws = append(ws, Writer{Name: "b", Dirs: []string{"/data/b"}, Started: t0.Add(time.Minute)})
	if f := r.only(r.poll()); f.Path != "/data/a" {
		t.Fatalf("named %q, want /data/a", f.Path)
	}
	gather := func() {
		t.Helper()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(r.g.Collector())
		if _, err := reg.Gather(); err != nil {
			t.Errorf("scrape: %v", err)
		}
	}

	r.fs.errs["/data/a"] = errors.New("permission denied")
	s := r.poll()
	if f := r.only(s); f.Path != "/data/b" || len(s.Unreadable) != 1 {
		t.Errorf("its name's path unreadable: named %q, unreadable %+v; want /data/b and /data/a", f.Path, s.Unreadable)
	}
	gather()

	delete(r.fs.errs, "/data/a")
	r.fs.set("/data/a", disk(3, 2*gib, 0)) // a mount over the directory
	s = r.poll()
	if len(s.Filesystems) != 2 || s.Filesystems[0].Path != "/data/b" || s.Filesystems[1].Path != "/data/a" || s.Filesystems[1].Stat.Dev != 3 {
		t.Errorf("its former name's path on another filesystem: %+v", s.Filesystems)
	}
	gather()

	r.fs.mu.Lock()
	delete(r.fs.stats, "/data/b")
	r.fs.mu.Unlock()
	r.fs.set("/data/c", disk(3, 2*gib, 0))
	ws = append(ws, Writer{Name: "c", Dirs: []string{"/data/c"}, Started: t0.Add(2 * time.Minute)})
	r.poll()
	r.fs.mu.Lock()
	delete(r.fs.stats, "/data/a")
	r.fs.mu.Unlock()
	s = r.poll()
	if f := r.only(s); f.Path != "/data/c" || len(s.Missing) != 2 {
		t.Errorf("its name's path missing: named %q, missing %v; want /data/c", f.Path, s.Missing)
	}
}

// TestMissingPathIsWatchedOnceItAppears: a path that does not exist yet is
// said so at the start, and read once it appears.
func TestMissingPathIsWatchedOnceItAppears(t *testing.T) {
	r := newRig(t, Config{Paths: []string{"/data"}})
	s := r.poll()
	if len(s.Filesystems) != 0 || len(s.Missing) != 1 || s.Missing[0] != "/data" {
		t.Fatalf("snapshot %+v, want /data missing", s)
	}
	if !strings.Contains(r.log.String(), "path does not exist yet; it is watched once it appears") {
		t.Errorf("log does not say the path is watched once it appears:\n%s", r.log)
	}
	r.poll()
	if n := strings.Count(r.log.String(), "does not exist yet"); n != 1 {
		t.Errorf("said %d times that /data does not exist yet, want once", n)
	}
	r.fs.set("/data", disk(1, gib, 0))
	if f := r.only(r.poll()); f.Path != "/data" || f.Stat.Size != gib {
		t.Errorf("after it appeared: %+v", f)
	}
	if !strings.Contains(r.log.String(), "path appeared; watching it") {
		t.Errorf("log does not say the path appeared:\n%s", r.log)
	}
}

// TestHungStatfsIsBounded: a statfs that never answers costs the poll at
// most the timeout, is reported unreadable, is not called again while it
// hangs, and is read again once it answers.
func TestHungStatfsIsBounded(t *testing.T) {
	r := newRig(t, Config{Paths: []string{"/mnt/nfs", "/data"}, Timeout: 20 * time.Millisecond})
	release := make(chan struct{})
	r.fs.hang["/mnt/nfs"] = release
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	r.fs.set("/mnt/nfs", disk(7, gib, 0))
	r.fs.set("/data", disk(1, gib, 0))
	for i := range 5 {
		var s Snapshot
		testkit.NoHang(t, "a poll with a hung statfs", func() { s = r.poll() })
		if len(s.Unreadable) != 1 || s.Unreadable[0].Path != "/mnt/nfs" || !strings.Contains(s.Unreadable[0].Err, "statfs did not answer within 20ms") {
			t.Fatalf("poll %d: unreadable %+v", i, s.Unreadable)
		}
		if f := r.only(s); f.Path != "/data" {
			t.Fatalf("poll %d: read %+v", i, f)
		}
	}
	// The one call's goroutine may not have run yet on a loaded machine, so
	// wait for it, then poll again: it must still be the only call.
	testkit.WaitFor(t, 10*time.Second, func() bool { return r.fs.callsOf("/mnt/nfs") >= 1 }, "the hung path's statfs to start")
	r.poll()
	if n := r.fs.callsOf("/mnt/nfs"); n != 1 {
		t.Errorf("a hung path was called %d times in 6 polls; want 1: hung calls must not pile up", n)
	}
	if n := strings.Count(r.log.String(), "statfs did not answer"); n != 1 {
		t.Errorf("the hang was logged %d times, want once:\n%s", n, r.log)
	}
	close(release)
	testkit.WaitFor(t, 10*time.Second, func() bool { return len(r.poll().Filesystems) == 2 }, "the released path to be read")
	if s := r.poll(); len(s.Unreadable) != 0 {
		t.Errorf("still unreadable after it answered: %+v", s.Unreadable)
	}
	if !strings.Contains(r.log.String(), "path readable again") {
		t.Errorf("log does not say the path recovered:\n%s", r.log)
	}
}

// TestStatfsErrorIsUnreadable: a statfs that fails (EACCES, EIO) reports the
// path unreadable with the error, and the other paths are read.
func TestStatfsErrorIsUnreadable(t *testing.T) {
	r := newRig(t, Config{Paths: []string{"/data", "/secret"}})
	r.fs.set("/data", disk(1, gib, 0))
	r.fs.errs["/secret"] = errors.New("permission denied")
	s := r.poll()
	if len(s.Unreadable) != 1 || s.Unreadable[0].Err != "statfs /secret: permission denied" || len(s.Filesystems) != 1 {
		t.Fatalf("snapshot %+v", s)
	}
}

// TestSaveSizeLearnedFromJumps: a save is the rise of the used bytes over
// the polls it takes, ended by three quiet polls; growth under the jump size
// (logs) is none; deleting the oldest checkpoint after a save does not
// shrink it; the largest of the last three counts.
func TestSaveSizeLearnedFromJumps(t *testing.T) {
	r := newRig(t, Config{Paths: []string{"/data"}, Writers: training("/data")})
	r.fs.set("/data", disk(1, 100*gib, 10*gib))
	used := uint64(10 * gib)
	step := func(add int64) Filesystem {
		used = uint64(int64(used) + add)
		r.fs.setUsed("/data", used)
		r.clock.Advance(5 * time.Second)
		return r.only(r.poll())
	}
	r.poll()
	for range 10 {
		if f := step(100 << 10); f.SaveBytes != 0 { // 100 KiB a poll: logs
			t.Fatalf("logs growing learned a save of %d", f.SaveBytes)
		}
	}
	// A 24 GiB save over three polls, a pause of two polls inside it,
	// after the logs have been quiet for a while.
	for range quietPolls {
		step(0)
	}
	step(10 * gib)
	step(0)
	step(0)
	step(8 * gib)
	if f := step(6 * gib); f.SaveBytes != 0 || !f.Saving {
		t.Fatalf("a save not yet over counts: %d (saving %v)", f.SaveBytes, f.Saving)
	}
	// Prometheus's DiskSaveWillNotFit waits for what the save leaves, as
	// the watchdog does: lavender_disk_saving says a save is written.
	if err := testutil.CollectAndCompare(r.g.Collector(), strings.NewReader(savingText(1)), "lavender_disk_saving"); err != nil {
		t.Errorf("during the save: %v", err)
	}
	step(0)
	step(-24 * gib) // the oldest checkpoint deleted after the save
	f := step(0)
	if f.SaveBytes != 24*gib || f.SaveReported || f.Saving {
		t.Fatalf("save learned %d (reported %v), want 24 GiB from the jumps", f.SaveBytes, f.SaveReported)
	}
	if err := testutil.CollectAndCompare(r.g.Collector(), strings.NewReader(savingText(0)), "lavender_disk_saving"); err != nil {
		t.Errorf("after the save: %v", err)
	}
	// A smaller save later: the largest of the last three stays.
	step(12 * gib)
	step(0)
	step(0)
	if f := step(0); f.SaveBytes != 24*gib {
		t.Fatalf("after a 12 GiB save: %d, want 24 GiB", f.SaveBytes)
	}
	for range 2 {
		step(12 * gib)
		step(-12 * gib)
		step(0)
		step(0)
	}
	if f := step(0); f.SaveBytes != 12*gib {
		t.Fatalf("after three 12 GiB saves: %d, want 12 GiB", f.SaveBytes)
	}
}

// TestSaveThatStartedBeforeThePoll: a save whose first bytes, under the
// jump size, landed a poll or two before its jump counts from before them.
func TestSaveThatStartedBeforeThePoll(t *testing.T) {
	r := newRig(t, Config{Paths: []string{"/data"}, Writers: training("/data")})
	r.fs.set("/data", disk(1, 64*mib, 0))
	used := uint64(0)
	for _, add := range []uint64{0, 0, 0, 300 << 10, 400 << 10, 24*mib - 700<<10, 0, 0, 0} {
		used += add
		r.fs.setUsed("/data", used)
		r.clock.Advance(5 * time.Second)
		r.poll()
	}
	if f := r.only(r.poll()); f.SaveBytes != 24*mib {
		t.Errorf("save %d, want 24 MiB", f.SaveBytes)
	}
}

// training is the Writers of one running phase writing to dir.
func training(dir string) func() []Writer {
	return func() []Writer { return []Writer{{Name: "Train", Dirs: []string{dir}}} }
}

// TestSaveLearnedOnlyWhileAPhaseWrites: jumps of the used bytes while no
// running phase has a directory on the filesystem (a download, another
// program's copy) teach nothing; a save that begins while one does is
// learned, even when the phase ends before the save's last bytes.
func TestSaveLearnedOnlyWhileAPhaseWrites(t *testing.T) {
	var mu sync.Mutex
	var writers []Writer
	r := newRig(t, Config{Paths: []string{"/data"}, Writers: func() []Writer { mu.Lock(); defer mu.Unlock(); return slices.Clone(writers) }})
	set := func(w ...Writer) { mu.Lock(); writers = w; mu.Unlock() }
	r.fs.set("/data", disk(1, 100*gib, 10*gib))
	used := uint64(10 * gib)
	step := func(add int64) Filesystem {
		used = uint64(int64(used) + add)
		r.fs.setUsed("/data", used)
		r.clock.Advance(5 * time.Second)
		return r.only(r.poll())
	}
	r.poll()
	for _, add := range []int64{0, 0, 0, 5 * gib, 0, 0, 0, 0, 3 * gib, -8 * gib, 0, 0, 0} {
		if f := step(add); f.SaveBytes != 0 || f.Saving {
			t.Fatalf("nothing trains: learned a save of %d (saving %v)", f.SaveBytes, f.Saving)
		}
	}
	// An ended phase is no writer either.
	set(Writer{Name: "Prep", Dirs: []string{"/data"}, Ended: true})
	for _, add := range []int64{6 * gib, 0, 0, 0, 0} {
		if f := step(add); f.SaveBytes != 0 {
			t.Fatalf("an ended phase's filesystem learned a save of %d", f.SaveBytes)
		}
	}
	set(Writer{Name: "Train", Dirs: []string{"/data"}})
	step(2 * gib)
	set() // the phase ends with its last save still being written
	step(1 * gib)
	step(0)
	step(0)
	if f := step(0); f.SaveBytes != 3*gib || f.SaveReported {
		t.Fatalf("save %d (reported %v), want the 3 GiB begun while Train wrote", f.SaveBytes, f.SaveReported)
	}
}

// stepper feeds the rig's /data readings a poll at a time, 5 s apart:
// each step adds add to the used bytes, then polls.
func stepper(r *rig, used uint64) func(add int64) Filesystem {
	return func(add int64) Filesystem {
		used = uint64(int64(used) + add)
		r.fs.setUsed("/data", used)
		r.clock.Advance(5 * time.Second)
		return r.only(r.poll())
	}
}

// TestWriterAfterASaveIsBackground: a writer that starts with a save's
// last file (logs, a data-prep job at 4 MB/s) keeps the used bytes rising
// by more than a jump every poll; the save still ends once the rises fall
// back, is learned at its own size, and the writer is the background from
// then on: no save is under way while it writes, and the next save on top
// of it is seen and learned at its own size too.
func TestWriterAfterASaveIsBackground(t *testing.T) {
	r := newRig(t, Config{Paths: []string{"/data"}, Writers: training("/data")})
	r.fs.set("/data", disk(1, 100*gib, 80*gib))
	step := stepper(r, 80*gib)
	r.poll()
	for range 5 {
		step(0)
	}
	const stream = 20_000_000 // a poll of the writer
	if f := step(2 * gib); !f.Saving {
		t.Fatal("a 2 GiB jump is no save")
	}
	for i := range 360 { // 30 minutes
		f := step(stream)
		if i >= quietPolls-1 && f.Saving {
			t.Fatalf("%s after the save, still saving", time.Duration(i+1)*5*time.Second)
		}
	}
	if f := step(stream); f.SaveBytes != 2*gib {
		t.Fatalf("save learned as %.2f GiB, want 2 GiB", float64(f.SaveBytes)/gib)
	}
	if f := step(3*gib + stream); !f.Saving {
		t.Fatal("a 3 GiB save over the writer is no save")
	}
	for range quietPolls {
		step(stream)
	}
	if f := step(stream); f.SaveBytes != 3*gib || f.Saving {
		t.Fatalf("second save learned as %d (saving %v), want 3 GiB", f.SaveBytes, f.Saving)
	}
}

// TestSaveOverABackgroundWriterIsItsExcess: a 70B model's checkpoint (730
// GB at 0.6 to 2 GB/s, ten minutes, with a pause inside it) on a 4 TiB
// filesystem where a data-prep job already writes 60 MB a poll, over the
// jump size there, is learned whole and only it: the job's writes over
// those ten minutes are not part of the save, nor do they keep it going
// after its last file.
func TestSaveOverABackgroundWriterIsItsExcess(t *testing.T) {
	var mu sync.Mutex
	var writers []Writer
	r := newRig(t, Config{Paths: []string{"/data"}, Writers: func() []Writer { mu.Lock(); defer mu.Unlock(); return slices.Clone(writers) }})
	r.fs.set("/data", disk(1, 4<<40, 1<<40))
	step := stepper(r, 1<<40)
	const stream = 60_000_000
	r.poll()
	for range 24 { // the job runs before training does
		step(stream)
	}
	mu.Lock()
	writers = []Writer{{Name: "Pretrain", Dirs: []string{"/data"}}}
	mu.Unlock()
	for range 24 {
		if f := step(stream); f.Saving {
			t.Fatal("the job's writes taken for a save")
		}
	}
	var save int64
	for i := range 120 {
		add := int64(3_000_000_000 + (i%8)*1_000_000_000) // 0.6 to 2 GB/s
		if i == 60 || i == 61 {
			add = 0 // gathering the optimizer state
		}
		save += add
		if f := step(add + stream); !f.Saving {
			t.Fatalf("poll %d of the save: not saving", i)
		}
	}
	for range quietPolls - 1 {
		step(stream)
	}
	if f := step(stream); f.Saving || f.SaveBytes != uint64(save) {
		t.Fatalf("save learned as %d (saving %v), want %d", f.SaveBytes, f.Saving, save)
	}
}

// TestAStreamThatNeverFallsBackIsNoSave: a download that starts while a
// phase trains looks like a save at first, but no save lasts half an hour:
// then it is the background, teaches no save size, and a save on top of
// it is learned at its own size.
func TestAStreamThatNeverFallsBackIsNoSave(t *testing.T) {
	r := newRig(t, Config{Paths: []string{"/data"}, Writers: training("/data")})
	r.fs.set("/data", disk(1, 1<<40, 100*gib))
	step := stepper(r, 100*gib)
	r.poll()
	for range 5 {
		step(0)
	}
	const stream = 100_000_000 // 20 MB/s
	polls := int(maxBurst / (5 * time.Second))
	for i := range polls + 1 {
		if f := step(stream); f.Saving != (i < polls) || f.SaveBytes != 0 {
			t.Fatalf("%s into the download: saving %v, save %d", time.Duration(i+1)*5*time.Second, f.Saving, f.SaveBytes)
		}
	}
	step(8*gib + stream)
	for range quietPolls {
		step(stream)
	}
	if f := step(stream); f.Saving || f.SaveBytes != 8*gib {
		t.Fatalf("save learned as %d (saving %v), want 8 GiB", f.SaveBytes, f.Saving)
	}
}

// TestReportedSaveGoesToTheLastDir: a writer's reported save counts for the
// filesystem of its last directory (the checkpoint directory), not its
// working directory's, and wins over what the jumps suggest.
func TestReportedSaveGoesToTheLastDir(t *testing.T) {
	var mu sync.Mutex
	w := Writer{Name: "Pretrain", Dirs: []string{"/home/u", "/data/out"}}
	r := newRig(t, Config{Writers: func() []Writer { mu.Lock(); defer mu.Unlock(); return []Writer{w} }})
	r.fs.set("/home/u", disk(2, 10*gib, gib))
	r.fs.set("/data/out", disk(1, 100*gib, gib))
	r.poll()
	mu.Lock()
	w.SavedAt, w.SaveBytes = r.clock.Now(), 30*gib
	mu.Unlock()
	s := r.poll()
	home, data := s.Filesystems[0], s.Filesystems[1]
	if home.SaveBytes != 0 || data.SaveBytes != 30*gib || !data.SaveReported {
		t.Fatalf("home %+v\ndata %+v", home, data)
	}
	// The same report seen again is not a new save; a jump larger than
	// it does not replace what the client says.
	r.fs.setUsed("/data/out", 50*gib)
	for range 3 {
		r.clock.Advance(5 * time.Second)
		r.poll()
	}
	if f := r.poll().Filesystems[1]; f.SaveBytes != 30*gib {
		t.Errorf("after a 49 GiB jump: %d, want the reported 30 GiB", f.SaveBytes)
	}
}

// TestFillRateOverTheWindow: the rate is the growth since the point a
// window ago, unknown before a third of the window is covered.
func TestFillRateOverTheWindow(t *testing.T) {
	r := newRig(t, Config{Paths: []string{"/data"}})
	r.fs.set("/data", disk(1, 1000*gib, 0))
	used := uint64(0)
	var f Filesystem
	for i := range 60 {
		f = r.only(r.poll())
		if i < 10 && f.RateSpan != 0 {
			t.Fatalf("rate known after %dm: %v over %s", i, f.Rate, f.RateSpan)
		}
		r.clock.Advance(time.Minute)
		rate := uint64(gib)
		if i >= 30 {
			rate = 2 * gib // the last 30 minutes grow twice as fast
		}
		used += rate
		r.fs.setUsed("/data", used)
	}
	f = r.only(r.poll())
	if f.RateSpan != 30*time.Minute {
		t.Fatalf("rate over %s, want the 30m window", f.RateSpan)
	}
	if want := 2.0 * gib / 60; f.Rate != want {
		t.Errorf("rate %v B/s, want %v (2 GiB a minute)", f.Rate, want)
	}
}

// TestWriterFilesystemsAreBounded: running writers' directories on more
// than MaxWriterFilesystems filesystems are not all watched, so the path
// label stays bounded; the newest writers' are, the oldest's are listed
// with why, counted in a metric, and logged once per change: once when the
// cap is hit, once when it no longer is.
func TestWriterFilesystemsAreBounded(t *testing.T) {
	var mu sync.Mutex
	var ws []Writer
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range MaxWriterFilesystems + 2 {
		ws = append(ws, Writer{Name: fmt.Sprintf("phase-%02d", i), Dirs: []string{fmt.Sprintf("/runs/%02d", i)}, Started: t0.Add(time.Duration(i) * time.Minute)})
	}
	r := newRig(t, Config{Paths: []string{"/dev/shm"}, Writers: func() []Writer { mu.Lock(); defer mu.Unlock(); return slices.Clone(ws) }})
	for i, w := range ws {
		r.fs.set(w.Dirs[0], disk(uint64(i+10), gib, 0))
	}
	r.fs.set("/dev/shm", disk(1, gib, 0))
	s := r.poll()
	r.poll()
	if n := len(s.Filesystems); n != 1+MaxWriterFilesystems {
		t.Errorf("%d filesystems, want %d", n, 1+MaxWriterFilesystems)
	}
	if len(s.NotWatched) != 2 || s.NotWatched[0].Path != "/runs/01" || s.NotWatched[1].Path != "/runs/00" ||
		s.NotWatched[1].Writers[0] != "phase-00" || !strings.Contains(s.NotWatched[0].Reason, "more than 32 filesystems") {
		t.Errorf("not watched %+v, want the two oldest phases' directories", s.NotWatched)
	}
	want := "# HELP lavender_disk_unwatched_paths " + unwatchedHelp + "\n# TYPE lavender_disk_unwatched_paths gauge\nlavender_disk_unwatched_paths 2\n"
	if err := testutil.CollectAndCompare(r.g.Collector(), strings.NewReader(want), "lavender_disk_unwatched_paths"); err != nil {
		t.Error(err)
	}
	if n := strings.Count(r.log.String(), "phases write to more filesystems than it watches"); n != 1 {
		t.Errorf("cap logged %d times over two polls, want once:\n%s", n, r.log)
	}
	mu.Lock()
	ws[0].Ended, ws[1].Ended = true, true
	mu.Unlock()
	s = r.poll()
	r.poll()
	if len(s.NotWatched) != 0 || len(s.Filesystems) != 1+MaxWriterFilesystems {
		t.Errorf("after the two oldest ended: %d filesystems, not watched %+v", len(s.Filesystems), s.NotWatched)
	}
	if n := strings.Count(r.log.String(), "every running phase's directory is watched again"); n != 1 {
		t.Errorf("the cap's end logged %d times, want once:\n%s", n, r.log)
	}
}

// TestEndedWritersAreReleased: four ended phases with eight directories
// each, on filesystems of their own, and a running phase with one: the
// ended phases' directories are not watched, so the running phase's is,
// whatever the cap. A save an ended phase reported is not lost either.
func TestEndedWritersAreReleased(t *testing.T) {
	var ws []Writer
	for i := range 4 {
		w := Writer{Name: fmt.Sprintf("Prep %d", i), Ended: true}
		for j := range 8 {
			w.Dirs = append(w.Dirs, fmt.Sprintf("/old/%d/%d", i, j))
		}
		ws = append(ws, w)
	}
	ws = append(ws, Writer{Name: "Train", Dirs: []string{"/scratch"}})
	r := newRig(t, Config{Writers: func() []Writer { return ws }})
	for i := range 4 {
		for j := range 8 {
			r.fs.set(fmt.Sprintf("/old/%d/%d", i, j), disk(uint64(100+8*i+j), gib, 0))
		}
	}
	r.fs.set("/scratch", disk(2, 64*mib, 63*mib))
	s := r.poll()
	if f := r.only(s); f.Path != "/scratch" || strings.Join(f.Writers, ",") != "Train" {
		t.Errorf("watched %+v, want /scratch alone", f)
	}
	if len(s.NotWatched) != 0 {
		t.Errorf("not watched %+v: ended phases' directories are released, not held back", s.NotWatched)
	}
	if n := r.fs.callsOf("/old/0/0"); n != 0 {
		t.Errorf("an ended phase's directory was read %d times", n)
	}
}

// TestOneFilesystemCountsOnceAgainstTheCap: a running phase's 40
// directories on one filesystem, and one on another, are all watched once
// their device is known: a path on a filesystem already watched costs
// nothing against the cap.
func TestOneFilesystemCountsOnceAgainstTheCap(t *testing.T) {
	w := Writer{Name: "Train"}
	for i := range 40 {
		w.Dirs = append(w.Dirs, fmt.Sprintf("/tmp/run/%02d", i))
	}
	w.Dirs = append(w.Dirs, "/scratch")
	r := newRig(t, Config{Paths: []string{"/tmp"}, Writers: func() []Writer { return []Writer{w} }})
	r.fs.set("/tmp", disk(1, gib, 0))
	for _, d := range w.Dirs[:40] {
		r.fs.set(d, disk(1, gib, 0))
	}
	r.fs.set("/scratch", disk(2, 64*mib, 0))
	var s Snapshot
	for range 3 {
		s = r.poll()
	}
	if len(s.NotWatched) != 0 || len(s.Filesystems) != 2 || len(s.Filesystems[0].Paths) != 41 || s.Filesystems[1].Path != "/scratch" {
		t.Fatalf("filesystems %+v, not watched %+v: want /tmp by 41 paths and /scratch", s.Filesystems, s.NotWatched)
	}
}

func TestNewRefusesRelativePaths(t *testing.T) {
	if _, err := New(Config{Paths: []string{"data"}}); err == nil || err.Error() != `disk path "data" is not absolute` {
		t.Errorf("New: %v", err)
	}
}

// TestMetrics pins the exposition against testdata/metrics.golden (go test
// -update rewrites it): one series set per filesystem, an error series for
// each unreadable path, the save size once known.
func TestMetrics(t *testing.T) {
	r := newRig(t, Config{Paths: []string{"/data", "/data/ckpt", "/dev/shm", "/secret", "/not/yet"}})
	r.fs.set("/data", Stat{Dev: 1, Size: 64 * mib, Free: 16 * mib, Avail: 15 * mib, Files: 16384, FilesFree: 16000})
	r.fs.set("/data/ckpt", Stat{Dev: 1, Size: 64 * mib, Free: 16 * mib, Avail: 15 * mib, Files: 16384, FilesFree: 16000})
	r.fs.set("/dev/shm", Stat{Dev: 2, Size: 64 * mib, Free: 64 * mib, Avail: 64 * mib, Files: 100, FilesFree: 3})
	r.fs.errs["/secret"] = errors.New("permission denied")
	r.g.trackers[1] = &tracker{reported: []uint64{24 * mib}}
	r.poll()
	golden := filepath.Join("testdata", "metrics.golden")
	if *update {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(r.g.Collector())
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, mf := range families {
			if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.CollectAndCompare(r.g.Collector(), strings.NewReader(string(want))); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(r.g.Collector()); n != 2*6+1+1+1 {
		t.Errorf("%d series, want 15: six per filesystem, an error for /secret, one save size, the unwatched paths", n)
	}
}

// TestAHungFilesystemKeepsTheCapsBound: forty directories of a running
// phase on one filesystem are all watched while it answers; once it hangs,
// at most MaxWriterFilesystems of them are read and reported unreadable,
// so a hung mount holds a bounded number of calls and error series.
func TestAHungFilesystemKeepsTheCapsBound(t *testing.T) {
	w := Writer{Name: "Train"}
	for i := range 40 {
		w.Dirs = append(w.Dirs, fmt.Sprintf("/mnt/nfs/%02d", i))
	}
	r := newRig(t, Config{Writers: func() []Writer { return []Writer{w} }, Timeout: 20 * time.Millisecond})
	for _, d := range w.Dirs {
		r.fs.set(d, disk(7, gib, 0))
	}
	r.poll()
	if s := r.poll(); len(s.Filesystems) != 1 || len(s.Filesystems[0].Paths) != 40 {
		t.Fatalf("while it answers: %+v", s.Filesystems)
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	r.fs.mu.Lock()
	for _, d := range w.Dirs {
		r.fs.hang[d] = release
	}
	r.fs.mu.Unlock()
	var s Snapshot
	for range 3 {
		s = r.poll()
	}
	if len(s.Unreadable) != MaxWriterFilesystems || len(s.NotWatched) != 40-MaxWriterFilesystems {
		t.Errorf("hung: %d unreadable, %d not watched; want %d and %d", len(s.Unreadable), len(s.NotWatched), MaxWriterFilesystems, 40-MaxWriterFilesystems)
	}
}

// savingText is lavender_disk_saving of /data at v, in the exposition format.
func savingText(v int) string {
	return fmt.Sprintf(`# HELP lavender_disk_saving 1 while a save (or a copy) is being written onto the filesystem (its used bytes jump), so what is free is not yet what the save leaves; 0 otherwise.
# TYPE lavender_disk_saving gauge
lavender_disk_saving{path="/data"} %d
`, v)
}
