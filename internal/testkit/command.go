package testkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// mainPackage is the command StartCommand runs.
const mainPackage = "github.com/lavender-ml/lavender/cmd/lavender"

// waitLimit bounds every wait on a child: long enough for a -race build
// on a loaded 2-core machine to start or stop, short enough to end a hang.
const waitLimit = 30 * time.Second

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// BinaryEnv names a lavender binary for the tests to run in place of the
// one Binary builds. CI points it at the release build it has just made:
// the slow tests then drive the shipped binary, without a second build.
const BinaryEnv = "LAVENDER_TEST_BINARY"

// Binary builds the lavender binary once per test binary (with -race when
// the tests run with it) and returns its path, or returns $LAVENDER_TEST_BINARY's.
// The build lives in a temp dir outside any test's; call RemoveBinaries
// from TestMain to delete it.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		if given := os.Getenv(BinaryEnv); given != "" {
			build.bin, build.err = givenBinary(given)
			return
		}
		build.bin, build.err = buildLavender()
	})
	if build.err != nil {
		t.Fatalf("testkit: %v", build.err)
	}
	return build.bin
}

// RemoveBinaries deletes what Binary built. Call it from TestMain after
// m.Run in a package that uses StartCommand:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		testkit.RemoveBinaries()
//		os.Exit(code)
//	}
func RemoveBinaries() {
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
}

// givenBinary checks that path, from $LAVENDER_TEST_BINARY, is an
// executable file, and makes it absolute: tests start it from their own
// working directories.
func givenBinary(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w", BinaryEnv, path, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s=%s: %w", BinaryEnv, path, err)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s=%s: not a regular file", BinaryEnv, path)
	case fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%s=%s: not executable", BinaryEnv, path)
	}
	return abs, nil
}

func buildLavender() (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build lavender: no go tool on PATH: %w", err)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("build lavender: %w", err)
	}
	build.dir, err = os.MkdirTemp("", "lavender-testkit-")
	if err != nil {
		return "", fmt.Errorf("build lavender: %w", err)
	}
	bin := filepath.Join(build.dir, "lavender")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	args = append(args, mainPackage)
	cmd := exec.Command(goTool, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// Options are the rarer settings of a command; the zero value is the
// usual one.
type Options struct {
	// Env is added to the environment. The child never inherits LAVENDER_*
	// variables (kong reads them as flags): a developer's
	// LAVENDER_BARK_CONFIG_DIR must not reach a test.
	Env []string
	// Dir is the working directory ("": the test's).
	Dir string
	// Stdin is the standard input (nil: none).
	Stdin io.Reader
	// KillAtEnd ends the process with SIGKILL at cleanup. By default the
	// cleanup sends SIGTERM and fails the test unless the process exits
	// with status 0 within 30 s: every test then also checks the graceful
	// shutdown. Set it for a test that leaves the process where a clean
	// exit is not the point (a kill -9 test, a fault left in place).
	KillAtEnd bool
}

// Command is a process started by StartCommand or StartProgram.
type Command struct {
	Name string   // the program's base name, for messages
	Args []string // without the program
	// Stdout and Stderr collect the output; lavender logs to Stderr.
	Stdout, Stderr *SyncBuffer

	t         testing.TB
	killAtEnd bool
	cmd       *exec.Cmd
	done      chan struct{} // closed once the process has exited
	err       error         // Wait's result, valid once done is closed
}

// StartCommand starts `lavender args…` (building it first, once) and ends
// it when the test ends (see Options.KillAtEnd). At cleanup a data race
// the child reported fails the test, and a failed test gets the child's
// output in its log.
//
// A serving command is best started with --web.listen-address=127.0.0.1:0
// and found with Addr or URL, which read the address back from its log.
func StartCommand(t testing.TB, args ...string) *Command {
	t.Helper()
	return StartCommandWith(t, Options{}, args...)
}

// StartCommandWith is StartCommand with Options.
func StartCommandWith(t testing.TB, o Options, args ...string) *Command {
	t.Helper()
	return StartProgram(t, o, Binary(t), args...)
}

// StartProgram is StartCommandWith for another program (Prometheus,
// Alertmanager in the end-to-end tests), with the same cleanup.
func StartProgram(t testing.TB, o Options, bin string, args ...string) *Command {
	t.Helper()
	c := &Command{Name: filepath.Base(bin), Args: args, Stdout: &SyncBuffer{}, Stderr: &SyncBuffer{},
		t: t, killAtEnd: o.KillAtEnd, done: make(chan struct{})}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Dir = o.Dir
	c.cmd.Stdin = o.Stdin
	c.cmd.Stdout, c.cmd.Stderr = c.Stdout, c.Stderr
	c.cmd.Env = append(childEnv(), o.Env...)
	// Its own process group, so the cleanup reaches anything it spawned
	// (`phase run`'s child); Pdeathsig, so a test binary killed by go
	// test's -timeout does not leave it holding a port.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.cmd.WaitDelay = 5 * time.Second // output pipes held open by a grandchild
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("testkit: start %s: %v", c, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(c.cleanup)
	return c
}

func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LAVENDER_") {
			env = append(env, kv)
		}
	}
	return env
}

func (c *Command) String() string { return strings.Join(append([]string{c.Name}, c.Args...), " ") }

func (c *Command) cleanup() {
	pgid := c.cmd.Process.Pid
	if !c.Exited() {
		if c.killAtEnd {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-c.done
		} else if err := c.stop(); err != nil {
			c.t.Errorf("%s at the end of the test: %v", c, err)
		}
	}
	// Anything left in the group (nothing is expected) goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	out := c.Stderr.String()
	if strings.Contains(out, "WARNING: DATA RACE") {
		c.t.Errorf("%s reported a data race:\n%s", c, Tail(out, 64<<10))
	} else if c.t.Failed() {
		c.t.Logf("----- %s -----\nstdout:\n%s\nstderr:\n%s", c, Tail(c.Stdout.String(), 16<<10), Tail(out, 64<<10))
	}
}

// Tail is the last n bytes of s, marked with "…" when cut, for failure
// messages that quote a long output.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Pid is the process id.
func (c *Command) Pid() int { return c.cmd.Process.Pid }

// Done is closed once the process has exited.
func (c *Command) Done() <-chan struct{} { return c.done }

// Exited says whether the process has exited.
func (c *Command) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process (not its group).
func (c *Command) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// ErrStillRunning is Wait's error when the process outlived the timeout.
var ErrStillRunning = errors.New("testkit: the process is still running")

// Wait waits up to timeout for the process to exit and returns exec's
// verdict: nil for exit status 0, an *exec.ExitError otherwise, or
// ErrStillRunning.
func (c *Command) Wait(timeout time.Duration) error {
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		return ErrStillRunning
	}
}

// Stop sends SIGTERM and waits up to 30 s for the exit; if the process is
// still running then, it is killed and Stop says so. It returns nil for a
// clean exit (status 0), and reports a process that had already exited.
func (c *Command) Stop() error {
	if c.Exited() {
		return fmt.Errorf("%s had exited before Stop: %v", c, c.err)
	}
	return c.stop()
}

// stop is Stop for a process that may exit at any moment.
func (c *Command) stop() error {
	if err := c.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	err := c.Wait(waitLimit)
	if errors.Is(err, ErrStillRunning) {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed", c, waitLimit)
	}
	if err != nil {
		return fmt.Errorf("%s: exit after SIGTERM: %w", c, err)
	}
	return nil
}

// ExitCode is the exit status once the process has exited; -1 while it
// runs or when a signal ended it.
func (c *Command) ExitCode() int {
	if !c.Exited() {
		return -1
	}
	return c.cmd.ProcessState.ExitCode()
}

// Addr waits until the command logs the address of its first listener
// and returns it (host:port). It reads exporter-toolkit's "Listening on"
// line, which comes at log level info: a command started with
// --log.level=warn or above never says where it listens.
func (c *Command) Addr(t testing.TB) string {
	t.Helper()
	return c.Addrs(t, 1)[0]
}

// Addrs waits until n listeners are logged and returns their addresses in
// the order logged.
func (c *Command) Addrs(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	c.waitLog(t, fmt.Sprintf("%d \"Listening on\" log lines", n), func() bool {
		addrs = logAddresses(c.Stderr.String(), "Listening on")
		return len(addrs) >= n
	})
	return addrs
}

// URL is the base URL of the first listener: https:// when the log says
// "TLS is enabled." for it, http:// otherwise.
func (c *Command) URL(t testing.TB) string {
	t.Helper()
	addr := c.Addr(t)
	scheme := ""
	c.waitLog(t, "the \"TLS is enabled.\" or \"TLS is disabled.\" line of "+addr, func() bool {
		log := c.Stderr.String()
		switch {
		case slices.Contains(logAddresses(log, "TLS is enabled."), addr):
			scheme = "https"
		case slices.Contains(logAddresses(log, "TLS is disabled."), addr):
			scheme = "http"
		}
		return scheme != ""
	})
	return scheme + "://" + addr
}

// Logged reports whether the process's log holds every one of parts,
// waiting up to 10 s for them: stderr is copied by another goroutine, so
// a line written before an answer can reach the buffer a moment after the
// answer does. After Stop the log is whole, and Logged answers at once.
func (c *Command) Logged(parts ...string) bool {
	return Poll(10*time.Second, func() bool {
		log := c.Stderr.String()
		for _, p := range parts {
			if !strings.Contains(log, p) {
				return false
			}
		}
		return true
	})
}

// waitLog polls the log for cond, and fails early, with the output, if
// the process exits first.
func (c *Command) waitLog(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ok := Poll(waitLimit, func() bool { return cond() || c.Exited() })
	switch {
	case cond():
	case c.Exited():
		t.Fatalf("%s exited (%v) before logging %s:\n%s", c, c.err, what, Tail(c.Stderr.String(), 16<<10))
	case !ok:
		t.Fatalf("gave up after %v waiting for %s to log %s:\n%s", waitLimit, c, what, Tail(c.Stderr.String(), 16<<10))
	}
}

var logfmtAddress = regexp.MustCompile(`(?:^|\s)address=("(?:[^"\\]|\\.)*"|\S+)`)

// logAddresses returns the address attribute of every log line whose
// message is msg, in logfmt or JSON (--log.format).
func logAddresses(log, msg string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "{") {
			var rec struct {
				Msg     string `json:"msg"`
				Address string `json:"address"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg && rec.Address != "" {
				out = append(out, rec.Address)
			}
			continue
		}
		if !strings.Contains(line, "msg="+logfmtQuote(msg)) {
			continue
		}
		if m := logfmtAddress.FindStringSubmatch(line); m != nil {
			addr := m[1]
			if strings.HasPrefix(addr, `"`) {
				_ = json.Unmarshal([]byte(addr), &addr)
			}
			out = append(out, addr)
		}
	}
	return out
}

// logfmtQuote writes msg as logfmt does: quoted when it has a space, an
// equals sign or a quote.
func logfmtQuote(msg string) string {
	if strings.ContainsAny(msg, " =\"") {
		b, _ := json.Marshal(msg)
		return string(b)
	}
	return msg
}
