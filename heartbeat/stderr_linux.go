package heartbeat

import (
	"io"
	"os"
	"os/exec"
	"strconv"

	"golang.org/x/sys/unix"
)

// stderrPipe is where the command's stderr goes (w, which the command
// holds) and where the wrapper reads it back (r). When the wrapper's own
// stderr is a terminal the command gets a pseudo-terminal of its own
// instead of a pipe, so that it sees a terminal as it would without the
// wrapper: colour, progress bars, the terminal's width. Its bytes pass
// through unchanged (output processing is off, so no "\r" is added to a
// "\n"). It is not the command's controlling terminal: Ctrl-C, job
// control and input stay with the real one. If no pseudo-terminal can be
// had, a pipe it is.
func stderrPipe(out io.Writer) (r, w *os.File, err error) {
	if f, ok := out.(*os.File); ok {
		if tio, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			if master, slave, err := newPTY(); err == nil {
				if err := likeTerminal(slave, tio, f); err == nil {
					return master, slave, nil
				}
				master.Close()
				slave.Close()
			}
		}
	}
	return os.Pipe()
}

// newPTY opens a pseudo-terminal pair with the kernel's default settings;
// neither end becomes anyone's controlling terminal.
func newPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	// Through the raw descriptor, not master.Fd(), which would make reads
	// of it blocking ones that no deadline can interrupt (see
	// stderrTee.finish).
	var n int
	rc, err := master.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			n, err = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
			if err == nil {
				err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0)
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err == nil {
		slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	}
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// likeTerminal gives pty the settings of tty, with output processing off,
// and tty's size.
func likeTerminal(pty *os.File, tio *unix.Termios, tty *os.File) error {
	raw := *tio
	raw.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(pty.Fd()), unix.TCSETS, &raw); err != nil {
		return err
	}
	if ws, err := unix.IoctlGetWinsize(int(tty.Fd()), unix.TIOCGWINSZ); err == nil {
		_ = unix.IoctlSetWinsize(int(pty.Fd()), unix.TIOCSWINSZ, ws)
	}
	return nil
}

// The relay passes on the command's stderr after the wrapper exits; see
// stderrTee.handOff. It is this same program, started again from
// /proc/self/exe (which still names it if the file was replaced), with
// relayName as its only argument and relayEnv set: init below turns it into
// the relay before anything else runs, in lavender and in the tests' own
// binaries alike. It has the stderr's read end on its stdin and the
// wrapper's stderr on its own (and nothing else: see closeInherited), runs in a session of its own (Ctrl-C on the
// terminal and a hang-up, which do not reach the command's other processes
// once the wrapper is gone, do not reach it either), in / (it must not
// keep a file system busy), and exits when the last holder closes stderr.
const (
	relayName = "lavender: phase run stderr relay"
	relayEnv  = "LAVENDER_INTERNAL_STDERR_RELAY"
)

func init() {
	if len(os.Args) == 1 && os.Args[0] == relayName && os.Getenv(relayEnv) == "1" {
		closeInherited()
		relay(0, 2)
		os.Exit(0)
	}
}

// closeInherited closes what the relay got from the wrapper beyond its
// three streams: descriptors the wrapper itself inherited (a job server's
// pipe, a lock file, a pipe whose reader waits for its end), which the
// relay has no use for and must not keep open after the command's
// processes are gone. Those are the ones without close-on-exec; the Go
// runtime's own have it.
func closeInherited() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			_ = unix.Close(fd)
		}
	}
}

// startRelay starts the relay over r, passing to out (nil: nowhere) and
// returns its pid. It is not waited for here (a goroutine reaps it, if
// this process lasts that long).
func startRelay(r, out *os.File) (int, error) {
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{relayName},
		Env:         []string{relayEnv + "=1"},
		Dir:         "/",
		Stdin:       r,
		SysProcAttr: &unix.SysProcAttr{Setsid: true},
	}
	if out != nil {
		cmd.Stderr = out
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// relay copies in to out until in ends (end of file, or EIO from a
// pseudo-terminal nobody holds). Raw system calls, so that a write to a
// broken out gives EPIPE rather than Go's exit on SIGPIPE for fd 2: once
// out fails, the rest is read and dropped, as the wrapper does, so the
// writers never block.
func relay(in, out int) {
	_ = unix.SetNonblock(in, false) // the wrapper's reads left it non-blocking
	buf := make([]byte, 32<<10)
	passing := true
	for {
		n, err := unix.Read(in, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			_, _ = unix.Poll([]unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}}, -1)
			continue
		case err != nil || n == 0:
			return
		}
		if passing {
			passing = writeAll(out, buf[:n])
		}
	}
}

func writeAll(fd int, p []byte) bool {
	for len(p) > 0 {
		n, err := unix.Write(fd, p)
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, -1)
		case err != nil:
			return false
		default:
			p = p[n:]
		}
	}
	return true
}
