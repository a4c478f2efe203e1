package proctree

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/lavender-ml/lavender/internal/procfile"
)

// Liveness is what Judge found of a pid.
type Liveness int

const (
	// Gone: no process has the pid, or it is a zombie, or the pid names
	// a process that started at another time (reused).
	Gone Liveness = iota
	// Living: procfs shows the process, and it is the one asked about.
	Living
	// Unseen: the process exists, but procfs does not show it to this
	// reader (a procfs mounted with hidepid=, as systemd's ProtectProc=
	// mounts one): whether it is the one asked about cannot be told, and
	// it must never be taken for gone.
	Unseen
)

func (l Liveness) String() string {
	switch l {
	case Living:
		return "living"
	case Unseen:
		return "unseen"
	default:
		return "gone"
	}
}

// Judge says whether pid still names a living process, as Alive does, and
// tells a process that procfs hides from this reader from one that is
// gone: a pid missing from procfs is asked of the kernel with signal 0,
// which is answered across hidepid (ESRCH: gone; success or EPERM: it
// exists), where root is the procfs of this process's own pid namespace.
// A pid whose files procfs lists but refuses to open (hidepid=noaccess) is
// unseen too. start is the start time read, when the process was seen.
func Judge(root string, pid int, startTicks uint64) (l Liveness, start uint64, err error) {
	s, err := ReadStat(root, pid)
	switch {
	case err == nil:
		if s.Dead() || (startTicks != 0 && s.StartTicks != startTicks) {
			return Gone, s.StartTicks, nil
		}
		return Living, s.StartTicks, nil
	case errors.Is(err, fs.ErrPermission):
		return Unseen, 0, nil
	case errors.Is(err, ErrGone):
		if exists, known := signalZero(root, pid); known && exists {
			return Unseen, 0, nil
		}
		return Gone, 0, nil
	default:
		return Gone, 0, err
	}
}

// signalZero asks the kernel whether pid exists, by sending it signal 0.
// known is false when root is not the procfs of this process's own pid
// namespace (a fake procfs, or a host's /proc seen from a container): its
// pids are not the ones kill(2) speaks of.
func signalZero(root string, pid int) (exists, known bool) {
	if pid < 1 || !ownPIDNamespace(root) {
		return false, false
	}
	switch err := syscall.Kill(pid, 0); {
	case err == nil, errors.Is(err, syscall.EPERM):
		return true, true
	case errors.Is(err, syscall.ESRCH):
		return false, true
	default:
		return false, false
	}
}

// ownPIDNamespace reports whether root is a procfs of this process's pid
// namespace: its "self" link names this process's own pid.
func ownPIDNamespace(root string) bool {
	self, err := os.Readlink(filepath.Join(rootOr(root), "self"))
	return err == nil && self == strconv.Itoa(os.Getpid())
}

// Visibility is how a procfs mount shows other users' processes to the
// process that reads it.
type Visibility struct {
	// Mounted is set when root is a proc mount of this process's mount
	// table; without it nothing else is known (a fake procfs, say).
	Mounted bool
	// HidePID is the mount's hidepid= option as the kernel shows it:
	// "invisible" (or "2"), "noaccess" ("1"), "ptraceable" ("4"), "off"
	// ("0"), or "" without one.
	HidePID string
	// GID is the gid= option, the group whose members see every process;
	// -1 without one.
	GID int
	// Hides is set when the mount hides other users' processes from this
	// process: hidepid is on and it holds neither CAP_SYS_PTRACE nor the
	// mount's group.
	Hides bool
}

// String names the mount's hiding options, e.g. "hidepid=invisible,gid=27".
func (v Visibility) String() string {
	if v.HidePID == "" {
		return "no hidepid"
	}
	s := "hidepid=" + v.HidePID
	if v.GID >= 0 {
		s += ",gid=" + strconv.Itoa(v.GID)
	}
	return s
}

// hidingModes are the hidepid= values that hide other users' processes.
var hidingModes = map[string]bool{"1": true, "2": true, "4": true, "noaccess": true, "invisible": true, "ptraceable": true}

// capSysPtrace is the bit of CAP_SYS_PTRACE in /proc/<pid>/status's CapEff:
// with it, hidepid hides nothing.
const capSysPtrace = 19

// maxMountinfoBytes bounds the read of a mount table, as every procfs
// read is bounded: some 7000 mounts. A larger table leaves the mount's
// options unknown, and each hidden pid is still caught by Judge.
const maxMountinfoBytes = procfile.MaxBytes

// ReadVisibility reads how the procfs at root shows other users'
// processes to this process: its mount options, from <root>/self/mountinfo,
// and this process's own capabilities and groups.
func ReadVisibility(root string) (Visibility, error) {
	root = rootOr(root)
	data, err := readBounded(filepath.Join(root, "self", "mountinfo"), maxMountinfoBytes)
	if err != nil {
		return Visibility{GID: -1}, fmt.Errorf("proctree: mount table: %w", err)
	}
	point, err := filepath.Abs(root)
	if err == nil {
		if resolved, rerr := filepath.EvalSymlinks(point); rerr == nil {
			point = resolved
		}
	}
	if err != nil {
		return Visibility{GID: -1}, fmt.Errorf("proctree: %w", err)
	}
	v := mountVisibility(data, point)
	if !v.Mounted || !hidingModes[v.HidePID] {
		return v, nil
	}
	v.Hides = true
	if capEffective(root, capSysPtrace) {
		v.Hides = false
	}
	if v.GID >= 0 && inGroup(v.GID) {
		v.Hides = false
	}
	return v, nil
}

// mountVisibility finds the mount on point in a mount table (proc(5)'s
// mountinfo) and reads its hidepid= and gid= options. Of several mounts on
// one point the last, the one on top, counts.
func mountVisibility(mountinfo []byte, point string) Visibility {
	v := Visibility{GID: -1}
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields := strings.Fields(pre)
		if len(fields) < 5 || unescapeMountField(fields[4]) != point {
			continue
		}
		v = Visibility{GID: -1}
		after := strings.Fields(post) // fstype, source, super options
		if len(after) < 3 || after[0] != "proc" {
			continue
		}
		v.Mounted = true
		for opt := range strings.SplitSeq(after[2], ",") {
			key, val, _ := strings.Cut(opt, "=")
			switch key {
			case "hidepid":
				v.HidePID = val
			case "gid":
				if gid, err := strconv.Atoi(val); err == nil && gid >= 0 {
					v.GID = gid
				}
			}
		}
	}
	return v
}

// unescapeMountField undoes mountinfo's octal escapes (\040 for a space,
// \011, \012, \134).
func unescapeMountField(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// capEffective reports whether this process holds capability bit in its
// effective set (CapEff of <root>/self/status). Unreadable: no.
func capEffective(root string, bit uint) bool {
	data, err := readBounded(filepath.Join(root, "self", "status"), 1<<16)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<bit) != 0
		}
	}
	return false
}

// inGroup reports whether gid is this process's effective group or one of
// its supplementary groups, as the kernel's in_group_p asks.
func inGroup(gid int) bool {
	if os.Getegid() == gid {
		return true
	}
	groups, err := os.Getgroups()
	if err != nil {
		return false
	}
	for _, g := range groups {
		if g == gid {
			return true
		}
	}
	return false
}
