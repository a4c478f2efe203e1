package heartbeat

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// openPTY opens a pseudo-terminal pair with the kernel's default settings
// (ISIG on, so ^C on the master is SIGINT for the foreground group), whose
// output nobody reads.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, slave = openPTYPair(t)
	go io.Copy(io.Discard, master) // the terminal's output; nobody reads it
	return master, slave
}

// openPTYPair is openPTY for a test that reads the terminal's output.
func openPTYPair(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, slave, err := newPTY()
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close(); slave.Close() })
	return master, slave
}

// wrapperProc is the test binary running as `lavender phase run` with a
// signal-counting command.
type wrapperProc struct {
	t            *testing.T
	cmd          *exec.Cmd
	record, logs string
	childPID     int
	exited       chan error
}

// startWrapperProc starts the wrapper process. With a terminal it is a
// session leader with that terminal, so its group is the foreground group,
// as a job a shell started; without, it is a process group of its own, as
// a job a scheduler started.
func startWrapperProc(t *testing.T, terminal *os.File) *wrapperProc {
	t.Helper()
	dir := t.TempDir()
	p := &wrapperProc{t: t, record: filepath.Join(dir, "record"), logs: filepath.Join(dir, "wrapper.log"), exited: make(chan error, 1)}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), wrapperEnv+"="+p.logs+" count "+p.record)
	if terminal != nil {
		p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = terminal, terminal, terminal
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	} else {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		if p.childPID > 0 {
			syscall.Kill(p.childPID, syscall.SIGKILL)
		}
	})
	testkit.WaitFor(t, 20*time.Second, func() bool {
		lines := p.lines()
		if len(lines) > 0 && strings.HasPrefix(lines[0], "ready_") {
			p.childPID, _ = strconv.Atoi(strings.TrimPrefix(lines[0], "ready_"))
			return true
		}
		select {
		case err := <-p.exited:
			data, _ := os.ReadFile(p.logs)
			t.Fatalf("wrapper exited before the command was ready: %v\n%s", err, data)
		default:
		}
		return false
	}, "the command to be ready")
	return p
}

// lines are what the command recorded after "ready".
func (p *wrapperProc) lines() []string {
	data, _ := os.ReadFile(p.record)
	return strings.Fields(strings.ReplaceAll(string(data), "ready ", "ready_"))
}

func (p *wrapperProc) counted() []string {
	lines := p.lines()
	if len(lines) > 0 {
		lines = lines[1:]
	}
	return lines
}

// waitForwarded waits until the wrapper has forwarded sig n times in all.
func (p *wrapperProc) waitForwarded(sig syscall.Signal, n int) {
	p.t.Helper()
	want := fmt.Sprintf(`msg="forwarded signal to the command" signal=%s`, strconv.Quote(sig.String()))
	if !strings.Contains(sig.String(), " ") {
		want = fmt.Sprintf(`msg="forwarded signal to the command" signal=%s`, sig.String())
	}
	testkit.WaitFor(p.t, 20*time.Second, func() bool {
		data, _ := os.ReadFile(p.logs)
		return strings.Count(string(data), want) >= n
	}, fmt.Sprintf("the wrapper to forward %s %d times", sig, n))
}

// finish ends the command with SIGWINCH (sent to it directly, after every
// signal the test counts) and returns what it recorded.
func (p *wrapperProc) finish() []string {
	p.t.Helper()
	if err := syscall.Kill(p.childPID, syscall.SIGWINCH); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			data, _ := os.ReadFile(p.logs)
			p.t.Fatalf("wrapper: %v\n%s", err, data)
		}
	case <-p.t.Context().Done():
	}
	return p.counted()
}

func foregroundGroup(t *testing.T, tty *os.File) int {
	t.Helper()
	pg, err := tcgetpgrp(tty)
	if err != nil {
		t.Fatal(err)
	}
	return pg
}

func equalLines(a, b []string) bool {
	return strings.Join(a, " ") == strings.Join(b, " ")
}

// TestWrapperSignalsReachTheCommandOnce: the command sees
// exactly one SIGINT per Ctrl-C, and exactly one SIGTERM per
// `kill -TERM <wrapper>` and per `kill -TERM -<pgid>`. Before, the command
// shared the wrapper's process group: the terminal's SIGINT and a group's
// SIGTERM reached it from the kernel and again from the wrapper, so a
// Python script's KeyboardInterrupt handler was itself interrupted.
func TestWrapperSignalsReachTheCommandOnce(t *testing.T) {
	t.Run("Ctrl-C on a terminal", func(t *testing.T) {
		master, slave := openPTY(t)
		p := startWrapperProc(t, slave)
		if fg := foregroundGroup(t, master); fg != p.childPID {
			t.Errorf("terminal's foreground group %d, want the command's (%d) while it runs", fg, p.childPID)
		}
		if _, err := master.Write([]byte{0x03}); err != nil { // ^C
			t.Fatal(err)
		}
		testkit.WaitFor(t, 20*time.Second, func() bool { return len(p.counted()) >= 1 }, "the command to get SIGINT")
		// Any copy of the SIGINT the wrapper got would be forwarded before
		// this SIGTERM (lower signals are delivered first).
		if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		p.waitForwarded(syscall.SIGTERM, 1)
		if got, want := p.finish(), []string{"interrupt", "terminated", "done"}; !equalLines(got, want) {
			t.Errorf("the command got %q, want %q", got, want)
		}
		if fg := foregroundGroup(t, master); fg == p.childPID {
			t.Errorf("the terminal stayed with the command's group after it ended")
		}
	})

	for _, tc := range []struct {
		name     string
		terminal bool
		group    bool
	}{
		{"kill -TERM wrapper, on a terminal", true, false},
		{"kill -TERM -pgid, on a terminal", true, true},
		{"kill -TERM wrapper, no terminal", false, false},
		{"kill -TERM -pgid, no terminal", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var slave *os.File
			if tc.terminal {
				_, slave = openPTY(t)
			}
			p := startWrapperProc(t, slave)
			target := p.cmd.Process.Pid
			if tc.group {
				pgid, err := syscall.Getpgid(target)
				if err != nil {
					t.Fatal(err)
				}
				target = -pgid
			}
			if err := syscall.Kill(target, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			// The wrapper forwards its one SIGTERM; a copy from the
			// group's signal would already be with the command.
			p.waitForwarded(syscall.SIGTERM, 1)
			if got, want := p.finish(), []string{"terminated", "done"}; !equalLines(got, want) {
				t.Errorf("the command got %q, want %q", got, want)
			}
		})
	}
}

// TestWrapperCtrlZ: Ctrl-Z stops the command, which has the terminal, and
// the wrapper then takes the terminal back and stops its own group, so a
// shell sees its job stopped. Here the wrapper's group is orphaned (its
// parent, the test, is in another session), so the kernel discards that
// SIGTSTP, as it does for any job without a shell: the wrapper at once
// gives the terminal back and continues the command, and Ctrl-C still
// reaches it. The terminal is never left with a stopped group.
func TestWrapperCtrlZ(t *testing.T) {
	master, slave := openPTY(t)
	p := startWrapperProc(t, slave)
	if _, err := master.Write([]byte{0x1a}); err != nil { // ^Z
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		data, _ := os.ReadFile(p.logs)
		// SIGTSTP is "stopped"; the stop signal read from waitid's siginfo.
		return strings.Contains(string(data), "command stopped") && strings.Contains(string(data), "signal=stopped")
	}, "the wrapper to see the stop")
	testkit.WaitFor(t, 20*time.Second, func() bool {
		state, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.childPID))
		if err != nil {
			return false
		}
		fields := strings.Fields(string(state[strings.LastIndexByte(string(state), ')')+1:]))
		return len(fields) > 0 && fields[0] != "T" && foregroundGroup(t, master) == p.childPID
	}, "the command to be running with the terminal again")
	if _, err := master.Write([]byte{0x03}); err != nil { // ^C
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { return len(p.counted()) >= 1 }, "the command to get SIGINT")
	if got, want := p.finish(), []string{"interrupt", "done"}; !equalLines(got, want) {
		t.Errorf("the command got %q, want %q", got, want)
	}
}
