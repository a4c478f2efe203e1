package heartbeat

import (
	"io"
	"os"
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
	mfd := int(master.Fd())
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0)
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
