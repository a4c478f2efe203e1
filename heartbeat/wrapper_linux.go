package heartbeat

import (
	"encoding/binary"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// How `phase run` delivers signals, on Linux.
//
// The command runs in a process group of its own, and the wrapper passes
// on, once, every SIGINT, SIGTERM and SIGHUP it receives itself. Run in the
// wrapper's group, the command would get a signal sent to the whole group
// (Ctrl-C, `kill -TERM -PGID`, timeout(1)) twice: once from the kernel and
// once from the wrapper, and Go's os/signal cannot tell the two senders
// apart, so the wrapper could not know when to keep still. With a group of
// its own the command gets what is sent to it or its group directly, plus
// exactly one copy of what reaches the wrapper.
//
// On a terminal, the command's group would then be a background group:
// Ctrl-C would reach only the wrapper (which passes it on, so that would
// still be once) but reading the terminal would stop the command with
// SIGTTIN, which breaks pdb and input(). So when the wrapper's group is the
// terminal's foreground group, the command's group takes the foreground as
// a shell gives it to a job: Ctrl-C, Ctrl-\ and Ctrl-Z go to the command
// alone. When the command stops (Ctrl-Z, or SIGTTIN after a `bg`), the
// wrapper takes the terminal back and stops its own group, so the shell
// sees its job stopped; continued, it hands the terminal on again and
// continues the command. When the command ends, the wrapper takes the
// terminal back before it sends `end`.
//
// If the wrapper itself is killed outright (SIGKILL), the command gets
// SIGTERM (PR_SET_PDEATHSIG), as it would have got the group's signal.

// forwardedSignals are what the wrapper passes on to the command.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// ControllingTerminal opens the process's controlling terminal for
// Wrapper.Terminal, or returns nil if it has none.
func ControllingTerminal() *os.File {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	return f
}

type job struct {
	tty       *os.File // nil: no terminal to manage
	logger    *slog.Logger
	ownPgrp   int
	childPgrp int
}

func newJob(tty *os.File, logger *slog.Logger) *job {
	j := &job{logger: logger, ownPgrp: syscall.Getpgrp()}
	if tty != nil {
		if _, err := tcgetpgrp(tty); err == nil {
			j.tty = tty
		}
	}
	return j
}

func (j *job) prepare(cmd *exec.Cmd) {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if j.tty != nil {
		if fg, err := tcgetpgrp(j.tty); err == nil && fg == j.ownPgrp {
			// The child puts its group in the foreground itself, before
			// exec, with every signal blocked.
			attr.Foreground = true
			attr.Ctty = int(j.tty.Fd())
		}
	}
	cmd.SysProcAttr = attr
}

// lockThread keeps Run on one OS thread while the command runs: the
// kernel sends Pdeathsig when the thread that started the child ends,
// not the process.
func (j *job) lockThread() (unlock func()) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// started records the command's process group: Setpgid with Pgid 0 names
// the group after the child.
func (j *job) started(pid int) { j.childPgrp = pid }

// watchStops follows the command's stops until it ends (or done closes).
func (j *job) watchStops(done <-chan struct{}) {
	pid := j.childPgrp
	if j.tty == nil {
		return
	}
	for {
		var info siginfo
		// Peek (WNOWAIT) so that the exit stays for cmd.Wait to reap.
		if err := waitid(pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT); err != nil {
			if err == unix.EINTR {
				continue
			}
			return // reaped already (ECHILD)
		}
		if info.code() != cldStopped {
			return // exited, killed or dumped
		}
		// Consume the stop report, then act on it.
		var consumed siginfo
		_ = waitid(pid, &consumed, unix.WSTOPPED|unix.WNOHANG)
		select {
		case <-done:
			return
		default:
		}
		j.childStopped(syscall.Signal(info.status()))
	}
}

func (j *job) childStopped(sig syscall.Signal) {
	fg, err := tcgetpgrp(j.tty)
	if err != nil {
		return
	}
	if (sig == syscall.SIGTTIN || sig == syscall.SIGTTOU) && fg == j.ownPgrp {
		// The command touched the terminal while the wrapper had it (the
		// wrapper was started in the background and then brought to the
		// foreground): hand the terminal on and let the command go on.
		j.setForeground(j.childPgrp)
		_ = syscall.Kill(-j.childPgrp, syscall.SIGCONT)
		return
	}
	if fg == j.childPgrp {
		j.setForeground(j.ownPgrp)
	}
	j.logger.Debug("command stopped; stopping the wrapper's process group too", "signal", sig)
	// As the terminal would have stopped the wrapper's group had it kept
	// the foreground. In an orphaned group the kernel discards SIGTSTP
	// and this goes straight on.
	_ = syscall.Kill(0, syscall.SIGTSTP)
	// Continued: by `fg` (the shell gave this group the terminal first),
	// by `bg`, or not stopped at all.
	if fg, err := tcgetpgrp(j.tty); err == nil && fg == j.ownPgrp {
		j.setForeground(j.childPgrp)
	}
	_ = syscall.Kill(-j.childPgrp, syscall.SIGCONT)
}

// exited takes the terminal back from the command's group, so that the
// wrapper and whatever runs after it (a script's next line) are in the
// foreground again.
func (j *job) exited() {
	if j.tty == nil {
		return
	}
	if fg, err := tcgetpgrp(j.tty); err == nil && fg == j.childPgrp {
		j.setForeground(j.ownPgrp)
	}
}

// setForeground makes pgrp the terminal's foreground group. A process in a
// background group may do so only with SIGTTOU blocked or ignored (else
// the kernel stops it); it is blocked on this thread only, so that no
// command started later inherits an ignored SIGTTOU.
func (j *job) setForeground(pgrp int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	sigaddset(&set, unix.SIGTTOU)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		j.logger.Warn("could not hand over the terminal", "err", err)
		return
	}
	err := unix.IoctlSetPointerInt(int(j.tty.Fd()), unix.TIOCSPGRP, pgrp)
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	if err != nil {
		j.logger.Warn("could not hand over the terminal", "pgrp", pgrp, "err", err)
	}
}

// sigaddset adds sig to set. The kernel's sigset is an array of words of
// the platform's size (64 bits, or 32), signal n at bit n-1; the signal
// numbers are the platform's own (SIGTTOU is 22 on most, 27 on MIPS).
func sigaddset(set *unix.Sigset_t, sig syscall.Signal) {
	bits := uint(unsafe.Sizeof(set.Val[0])) * 8
	n := uint(sig) - 1
	set.Val[n/bits] |= 1 << (n % bits)
}

func tcgetpgrp(tty *os.File) (int, error) {
	return unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
}

// cldStopped is siginfo's si_code for a child that stopped.
const cldStopped = 5 // CLD_STOPPED, the same on every Linux platform

// siginfo is what waitid fills in for a child: x/sys/unix names the
// header in each platform's order (si_code and si_errno trade places on
// MIPS); si_pid, si_uid and si_status then start the union, which is
// aligned like a pointer (16 bytes in on 64-bit systems, 12 on 32-bit
// ones).
type siginfo unix.Siginfo

const sigchldOffset = (12 + unsafe.Sizeof(uintptr(0)) - 1) / unsafe.Sizeof(uintptr(0)) * unsafe.Sizeof(uintptr(0))

func (s *siginfo) code() int32 { return s.Code }

// status is the exit code, or for CLD_STOPPED the stop signal.
func (s *siginfo) status() int32 {
	raw := (*[unsafe.Sizeof(unix.Siginfo{})]byte)(unsafe.Pointer(s))
	return int32(binary.NativeEndian.Uint32(raw[sigchldOffset+8:]))
}

func waitid(pid int, info *siginfo, options int) error {
	return unix.Waitid(unix.P_PID, pid, (*unix.Siginfo)(info), options, nil)
}
