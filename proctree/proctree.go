// Package proctree reads who a process is from procfs: its parent, its
// state and its start time (from /proc/<pid>/stat), whether it still
// lives, whether it descends from one of a few other processes, and the
// host and pid namespace a pid belongs to, and whether procfs hides other
// users' processes (hidepid=) so that a pid missing from it is not proof of
// death. The exporter judges a phase's pid with it (did the process die
// without an end? does a start come from inside the running phase?), and
// the kernel-log readers ask it whose process the kernel named. Every path is under a procfs root, so tests
// can feed a fake /proc; every read is bounded. It imports nothing of
// lavender's.
package proctree

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lavender-ml/lavender/internal/procfile"
)

// DefaultRoot is where procfs is mounted unless configured otherwise.
const DefaultRoot = "/proc"

// maxStatBytes bounds the read of one stat file: the line is some 300
// bytes, its command name at most 64.
const maxStatBytes = 4096

// maxDepth bounds an ancestry walk; a real one is a few tens deep.
const maxDepth = 1024

// Stat is what /proc/<pid>/stat says of a process.
type Stat struct {
	PID   int
	Comm  string // the command name the kernel keeps (at most 15 bytes)
	State byte   // R, S, D, Z, X, …
	PPID  int
	// StartTicks is when the process started, in clock ticks after boot:
	// with the pid it names one process, since a pid is reused only by a
	// process that starts later.
	StartTicks uint64
}

// Dead reports whether the process has ended and only waits to be reaped
// (zombie) or is being torn down.
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' || s.State == 'x' }

// errESRCH is what reading the stat of a process that ends meanwhile gives.
var errESRCH error = syscall.ESRCH

// ErrGone is the error of ReadStat for a pid that names no process.
var ErrGone = errors.New("no such process")

// ReadStat reads <root>/<pid>/stat. A pid that names no process gives an
// error wrapping ErrGone.
func ReadStat(root string, pid int) (Stat, error) { return readStat(root, pid, nil) }

// readStat is ReadStat reading into *buf, which a Scan reuses for every
// process (buf may be nil).
func readStat(root string, pid int, buf *[]byte) (Stat, error) {
	if pid < 1 {
		return Stat{}, fmt.Errorf("proctree: pid %d: %w", pid, ErrGone)
	}
	path := filepath.Join(rootOr(root), strconv.Itoa(pid), "stat")
	data, err := procfile.Read(path, buf, maxStatBytes)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errESRCH) {
		return Stat{}, fmt.Errorf("proctree: pid %d: %w", pid, ErrGone)
	}
	if err != nil {
		return Stat{}, fmt.Errorf("proctree: %w", err)
	}
	s, err := parseStat(data)
	if err != nil {
		return Stat{}, fmt.Errorf("proctree: %s: %w", path, err)
	}
	if s.PID != pid {
		return Stat{}, fmt.Errorf("proctree: %s names pid %d", path, s.PID)
	}
	return s, nil
}

// parseStat reads "pid (comm) state ppid … starttime …". The command name
// may hold spaces and parentheses, so it ends at the line's last ')'.
func parseStat(data []byte) (Stat, error) {
	open := bytes.IndexByte(data, '(')
	closing := bytes.LastIndexByte(data, ')')
	if open < 1 || closing < open {
		return Stat{}, errors.New("malformed stat line")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(data[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("malformed pid: %w", err)
	}
	// Fields after the name, counted from 3 as proc(5) numbers them.
	fields := strings.Fields(string(data[closing+1:]))
	const state, ppid, starttime = 3, 4, 22
	if len(fields) < starttime-2 {
		return Stat{}, fmt.Errorf("stat line has %d fields, want at least %d", len(fields)+2, starttime)
	}
	s := Stat{PID: pid, Comm: string(data[open+1 : closing])}
	if len(fields[state-3]) != 1 {
		return Stat{}, fmt.Errorf("malformed state %q", fields[state-3])
	}
	s.State = fields[state-3][0]
	if s.PPID, err = strconv.Atoi(fields[ppid-3]); err != nil {
		return Stat{}, fmt.Errorf("malformed ppid: %w", err)
	}
	if s.StartTicks, err = strconv.ParseUint(fields[starttime-3], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("malformed starttime: %w", err)
	}
	return s, nil
}

// Alive reports whether pid still names a living process, and its start
// time. With startTicks non-zero, a process that started at another time
// reuses the pid and does not count: the one asked about is gone.
func Alive(root string, pid int, startTicks uint64) (alive bool, start uint64, err error) {
	s, err := ReadStat(root, pid)
	if errors.Is(err, ErrGone) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	if s.Dead() || (startTicks != 0 && s.StartTicks != startTicks) {
		return false, s.StartTicks, nil
	}
	return true, s.StartTicks, nil
}

// AncestorAmong walks from pid up its parents (pid itself first) and
// returns the first of candidates it meets. ok is false when none is met
// before the walk ends (at pid 0, or at a process that is gone).
func AncestorAmong(root string, pid int, candidates []int) (ancestor int, ok bool) {
	for depth := 0; pid > 0 && depth < maxDepth; depth++ {
		for _, c := range candidates {
			if c == pid {
				return c, true
			}
		}
		s, err := ReadStat(root, pid)
		if err != nil {
			return 0, false
		}
		pid = s.PPID
	}
	return 0, false
}

// Host is the boot and the pid namespace a process sees: two processes
// compare pids only when both are the same.
type Host struct {
	BootID string // <root>/sys/kernel/random/boot_id, trimmed
	PIDNS  string // readlink <root>/self/ns/pid, e.g. "pid:[4026531836]"
}

// Known reports whether both are known: a pid is judged only then.
func (h Host) Known() bool { return h.BootID != "" && h.PIDNS != "" }

// ReadHost reads the boot id and pid namespace of the reading process.
func ReadHost(root string) (Host, error) {
	root = rootOr(root)
	id, err := readBounded(filepath.Join(root, "sys", "kernel", "random", "boot_id"), 128)
	if err != nil {
		return Host{}, fmt.Errorf("proctree: boot id: %w", err)
	}
	ns, err := os.Readlink(filepath.Join(root, "self", "ns", "pid"))
	if err != nil {
		return Host{}, fmt.Errorf("proctree: pid namespace: %w", err)
	}
	h := Host{BootID: strings.TrimSpace(string(id)), PIDNS: strings.TrimSpace(ns)}
	if !h.Known() {
		return Host{}, errors.New("proctree: empty boot id or pid namespace")
	}
	return h, nil
}

func rootOr(root string) string {
	if root == "" {
		return DefaultRoot
	}
	return root
}

// readBounded reads path through procfile: procfs files are small, and a
// file that is not, or that is a FIFO or a device (a fake /proc's mistake),
// must neither be read whole nor block. A file over limit is an error.
func readBounded(path string, limit int64) ([]byte, error) {
	return procfile.Read(path, nil, int(limit))
}

// userHZ is the unit of procfs's clock ticks, fixed at 100 on Linux
// whatever the kernel's own tick rate.
const userHZ = 100

// StartTime turns a process's start in clock ticks after boot into a time,
// from the boot time in <root>/stat (btime, whole seconds).
func StartTime(root string, ticks uint64) (time.Time, error) {
	data, err := readBounded(filepath.Join(rootOr(root), "stat"), 1<<20)
	if err != nil {
		return time.Time{}, fmt.Errorf("proctree: boot time: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			btime, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("proctree: boot time: %w", err)
			}
			return time.Unix(btime, 0).Add(time.Duration(ticks) * time.Second / userHZ), nil
		}
	}
	return time.Time{}, errors.New("proctree: boot time: no btime line")
}

// maxScan bounds a Scan: a host has far fewer processes than this.
const maxScan = 1 << 16

// Tree is every process of a procfs at one moment, by pid.
type Tree map[int]Stat

// Scan reads the stat of every process under root. Processes that end
// while it reads are left out; it fails only when root cannot be listed.
func Scan(root string) (Tree, error) {
	dir, err := os.Open(rootOr(root))
	if err != nil {
		return nil, fmt.Errorf("proctree: %w", err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(maxScan)
	if err != nil && len(names) == 0 {
		return nil, fmt.Errorf("proctree: %w", err)
	}
	t := make(Tree, len(names))
	var buf []byte
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid < 1 {
			continue
		}
		if s, err := readStat(root, pid, &buf); err == nil {
			t[pid] = s
		}
	}
	return t, nil
}

// AncestorAmong is the package's AncestorAmong over the tree as it was
// when scanned: it answers for a process that has ended since.
func (t Tree) AncestorAmong(pid int, candidates []int) (ancestor int, ok bool) {
	for depth := 0; pid > 0 && depth < maxDepth; depth++ {
		for _, c := range candidates {
			if c == pid {
				return c, true
			}
		}
		s, found := t[pid]
		if !found {
			return 0, false
		}
		pid = s.PPID
	}
	return 0, false
}
