package heartbeat

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
)

// heldStderr is a grandchild that holds the command's stderr open after
// the command exits: it waits on the FIFO $1, then writes a line to stderr
// and, only if that write succeeded, "ok" to the file $2. A grandchild that
// died of SIGPIPE (a pipe nobody reads) or got EIO (a pseudo-terminal
// nobody holds) writes no "ok".
const heldStderr = `(read x < "$1"; echo late >&2 && echo ok > "$2") & `

// grandchild is a FIFO that holds heldStderr back until the test lets it
// go on.
type grandchild struct {
	fifo, marker string
	once         sync.Once
}

func newGrandchild(t testing.TB) *grandchild {
	t.Helper()
	dir := t.TempDir()
	g := &grandchild{fifo: filepath.Join(dir, "go-on"), marker: filepath.Join(dir, "wrote")}
	if err := unix.Mkfifo(g.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A failed test still lets the grandchild end (the FIFO's end of file
	// ends its read).
	t.Cleanup(func() { g.release(t, false) })
	return g
}

// release lets the grandchild go on, once it waits on the FIFO.
func (g *grandchild) release(t testing.TB, must bool) {
	g.once.Do(func() {
		ok := testkit.Poll(20*time.Second, func() bool {
			// Non-blocking: fails with ENXIO until the grandchild opens
			// the FIFO to read it.
			f, err := os.OpenFile(g.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return false
			}
			defer f.Close()
			_, err = f.WriteString("go on\n")
			return err == nil
		})
		if !ok && must {
			t.Error("the grandchild never waited on its FIFO")
		}
	})
}

func (g *grandchild) wrote() string {
	data, _ := os.ReadFile(g.marker)
	return string(data)
}

// phaseRunCommand is `lavender phase run Grandchild -- sh -c script sh
// FIFO MARKER` against the exporter at url, in a process group of its own.
func phaseRunCommand(t *testing.T, url, script string, g *grandchild) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "sh", "-c", script, "sh", g.fifo, g.marker)
	cmd.Env = append(os.Environ(), phaseRunEnv+"="+url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// runToExit runs the wrapper process cmd and returns its exit code.
func runToExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the wrapper did not exit")
	}
	return cmd.ProcessState.ExitCode()
}

// TestWrapperDoesNotWaitForTheCommandsChildren: `phase run -- sh -c
// '(…; echo late >&2) & exit N'`, the wrapper in a process of its own as
// `lavender phase run` is, its stderr on a file and on a terminal. The
// phase ends as the command did (ok, or failed with the reason its stderr
// gave) by the time the wrapper exits, while the grandchild still holds
// stderr open; the wrapper exits with the command's code. When the
// grandchild writes afterwards, its line reaches the wrapper's stderr and
// its write succeeds. Before, the wrapper waited 2 s for the grandchild's
// end of file (past the exporter's grace for a gone pid, which then ended
// the phase as died), and the grandchild's late write died of SIGPIPE
// (on a terminal: failed with EIO) once the wrapper had exited.
func TestWrapperDoesNotWaitForTheCommandsChildren(t *testing.T) {
	for _, tc := range []struct {
		name, script   string
		code           int
		status, reason string
		before         string // what the command wrote to stderr
	}{
		{"exit 0", heldStderr + `echo early >&2; exit 0`, 0, phaseapi.StatusOK, "", "early\n"},
		{"exit 3", heldStderr + `echo "RuntimeError: boom" >&2; exit 3`, 3, phaseapi.StatusFailed, "exit code 3: RuntimeError: boom", "RuntimeError: boom\n"},
	} {
		for _, onTerminal := range []bool{false, true} {
			name := tc.name + ", stderr on a file"
			if onTerminal {
				name = tc.name + ", stderr on a terminal"
			}
			t.Run(name, func(t *testing.T) {
				env := newTestEnv(t)
				srv := env.server()
				g := newGrandchild(t)
				cmd := phaseRunCommand(t, srv.URL, tc.script, g)
				var stderr func() string
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
					var seen testkit.SyncBuffer
					go func() { _, _ = io.Copy(&seen, master) }()
					cmd.Stderr = slave
					stderr = seen.String
				} else {
					file, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
					if err != nil {
						t.Fatal(err)
					}
					defer file.Close()
					cmd.Stderr = file
					stderr = func() string {
						data, _ := os.ReadFile(file.Name())
						return string(data)
					}
				}
				if code := runToExit(t, cmd); code != tc.code {
					t.Errorf("wrapper exit code %d, want the command's %d", code, tc.code)
				}
				p, ok := env.phase("Grandchild")
				if !ok || p.Status != tc.status || p.Reason != tc.reason {
					t.Errorf("phase when the wrapper exited: %+v; want %s %q", p, tc.status, tc.reason)
				}
				if g.wrote() != "" {
					t.Fatal("the grandchild went on before it was let go")
				}

				g.release(t, true)
				testkit.WaitFor(t, 20*time.Second, func() bool { return g.wrote() == "ok\n" }, "the grandchild's write to succeed")
				testkit.WaitFor(t, 20*time.Second, func() bool { return strings.HasSuffix(stderr(), "late\n") }, "its line on the wrapper's stderr")
				if got, want := stderr(), tc.before+"late\n"; got != want {
					t.Errorf("the wrapper's stderr got %q, want %q", got, want)
				}
				if p2, _ := env.phase("Grandchild"); p2.Status != p.Status || p2.Reason != p.Reason {
					t.Errorf("phase changed after the wrapper exited: %+v", p2)
				}
			})
		}
	}
}

// TestStderrRelayKeepsNoInheritedDescriptor: a descriptor the wrapper
// inherited (fd 3, the write end of a pipe whose reader waits for its end,
// as a CI runner's or make's) is not kept open by the relay. Once the
// wrapper has exited and the grandchild has closed its own copy, the
// reader gets its end, while the grandchild still holds stderr and so the
// relay still runs.
func TestStderrRelayKeepsNoInheritedDescriptor(t *testing.T) {
	env := newTestEnv(t)
	g := newGrandchild(t)
	cmd := phaseRunCommand(t, env.server().URL, `(exec 3>&-; read x < "$1"; echo late >&2 && echo ok > "$2") & exit 0`, g)
	waitsForEnd, inherited, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer waitsForEnd.Close()
	cmd.ExtraFiles = []*os.File{inherited}
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	if code := runToExit(t, cmd); code != 0 {
		t.Fatalf("wrapper exit code %d", code)
	}
	inherited.Close()
	if err := waitsForEnd.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if data, err := io.ReadAll(waitsForEnd); err != nil || len(data) != 0 {
		t.Errorf("the inherited pipe gave %q, %v; want its end: something still holds it", data, err)
	}
	if g.wrote() != "" {
		t.Fatal("the grandchild went on before it was let go")
	}
	g.release(t, true)
	testkit.WaitFor(t, 20*time.Second, func() bool { return g.wrote() == "ok\n" }, "the grandchild's write to succeed")
}

// TestWrapperPassesOnAGrandchildsStderrInProcess: with stderr on a writer
// that is no file (a library caller's buffer), no relay can write to it;
// the wrapper's own process passes the grandchild's late line on, and
// Run still returns as the command exits.
func TestWrapperPassesOnAGrandchildsStderrInProcess(t *testing.T) {
	env := newTestEnv(t)
	client, err := NewClient(env.server().URL)
	if err != nil {
		t.Fatal(err)
	}
	g := newGrandchild(t)
	var stderr testkit.SyncBuffer
	w := &Wrapper{Client: client, Phase: "Grandchild", Every: time.Hour, Stderr: &stderr}
	done := make(chan wrapperRun, 1)
	go func() {
		code, err := w.Run(context.Background(), "sh", "-c", heldStderr+`echo "RuntimeError: boom" >&2; exit 3`, "sh", g.fifo, g.marker)
		done <- wrapperRun{code, err}
	}()
	if r := waitResult(t, done); r.err != nil || r.code != 3 {
		t.Fatalf("Run = %d, %v; want the command's 3", r.code, r.err)
	}
	if p, _ := env.phase("Grandchild"); p.Status != phaseapi.StatusFailed || p.Reason != "exit code 3: RuntimeError: boom" {
		t.Errorf("phase %s %q; want failed with the command's reason", p.Status, p.Reason)
	}
	if g.wrote() != "" {
		t.Fatal("the grandchild went on before it was let go")
	}
	g.release(t, true)
	testkit.WaitFor(t, 20*time.Second, func() bool { return g.wrote() == "ok\n" }, "the grandchild's write to succeed")
	testkit.WaitFor(t, 20*time.Second, func() bool { return stderr.String() == "RuntimeError: boom\nlate\n" }, "its line on the wrapper's stderr")
}

// BenchmarkWrapperEndWithAGrandchildHoldingStderr: how long Run takes over
// a command that exits at once, leaving a process that holds its stderr
// (on a file, so the relay takes it over). The exporter ends a phase as
// died once its pid has been gone at two checks a second apart, so this
// must stay well under a second; it was 2 s before.
func BenchmarkWrapperEndWithAGrandchildHoldingStderr(b *testing.B) {
	env := newTestEnv(b)
	client, err := NewClient(env.server().URL)
	if err != nil {
		b.Fatal(err)
	}
	file, err := os.Create(filepath.Join(b.TempDir(), "stderr"))
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	w := &Wrapper{Client: client, Phase: "Grandchild", Every: time.Hour, Stderr: file}
	for b.Loop() {
		b.StopTimer()
		g := newGrandchild(b)
		b.StartTimer()
		code, err := w.Run(context.Background(), "sh", "-c", heldStderr+"exit 0", "sh", g.fifo, g.marker)
		b.StopTimer()
		if err != nil || code != 0 {
			b.Fatalf("Run = %d, %v", code, err)
		}
		g.release(b, true)
		b.StartTimer()
	}
}
