package heartbeat

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// describeStderr is the child that says what its stderr is, and fails as
// Python does.
func describeStderr() int {
	_, err := unix.IoctlGetTermios(2, unix.TCGETS)
	cols := 0
	if ws, err := unix.IoctlGetWinsize(2, unix.TIOCGWINSZ); err == nil {
		cols = int(ws.Col)
	}
	fmt.Fprintf(os.Stderr, "isatty=%v cols=%d\n\x1b[31mred\x1b[0m\rRuntimeError: boom\n", err == nil, cols)
	return 1
}

// TestWrapperStderrIsATerminalOnATerminal: when the wrapper's stderr is a
// terminal, the command's is one too, of the same width, so tools keep
// their colour and progress bars; its bytes reach the terminal unchanged
// (no "\r" added, escapes and carriage returns kept), and the wrapper still
// reads why it failed. With stderr on a pipe or file, the command gets a
// pipe, as without the wrapper.
func TestWrapperStderrIsATerminalOnATerminal(t *testing.T) {
	const written = "\x1b[31mred\x1b[0m\rRuntimeError: boom\n"
	for _, onTerminal := range []bool{true, false} {
		t.Run(fmt.Sprint("terminal=", onTerminal), func(t *testing.T) {
			env := newTestEnv(t)
			client, err := NewClient(env.server().URL)
			if err != nil {
				t.Fatal(err)
			}
			var seen testkit.SyncBuffer
			w := &Wrapper{Client: client, Phase: "Train", Every: time.Hour, Stdout: io.Discard, Stderr: &seen}
			want := "isatty=false cols=0\n" + written
			if onTerminal {
				master, slave := openPTYPair(t)
				tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
				if err != nil {
					t.Fatal(err)
				}
				tio.Oflag &^= unix.OPOST // so the test sees the bytes the terminal got
				if err := unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio); err != nil {
					t.Fatal(err)
				}
				if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 132}); err != nil {
					t.Fatal(err)
				}
				go io.Copy(&seen, master)
				w.Stderr = slave
				want = "isatty=true cols=132\n" + written
			}
			r := waitResult(t, startWrapper(t, w, "tty"))
			if r.err != nil || r.code != 1 {
				t.Fatalf("Run = %d, %v; want 1", r.code, r.err)
			}
			testkit.WaitFor(t, 20*time.Second, func() bool { return seen.String() == want }, "the command's stderr on the wrapper's")
			p, _ := env.phase("Train")
			if p.Status != "failed" || !strings.Contains(p.Reason, "RuntimeError: boom") {
				t.Errorf("phase %s, reason %q; want failed with the command's RuntimeError", p.Status, p.Reason)
			}
		})
	}
}
