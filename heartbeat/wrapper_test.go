package heartbeat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
)

// childEnv makes the test binary act as the wrapped command; see TestMain.
const childEnv = "LAVENDER_TEST_CHILD"

// wrapperEnv makes the test binary act as `lavender phase run`, in a
// process of its own; see runWrapperProcess.
const wrapperEnv = "LAVENDER_TEST_WRAPPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	if spec := os.Getenv(wrapperEnv); spec != "" {
		os.Exit(runWrapperProcess(spec))
	}
	if url := os.Getenv(phaseRunEnv); url != "" {
		os.Exit(runPhaseRunProcess(url, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// runWrapperProcess runs a Wrapper as its own process, as `lavender phase
// run` does: the terminal it has, if any, goes to the command. spec is
// "LOGFILE CHILDMODE"; the wrapper logs at debug level to LOGFILE and runs
// this binary in CHILDMODE. No exporter: heartbeats are not sent.
func runWrapperProcess(spec string) int {
	logFile, childMode, _ := strings.Cut(spec, " ")
	f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return 98
	}
	os.Setenv(childEnv, childMode)
	exe, err := os.Executable()
	if err != nil {
		return 98
	}
	w := &Wrapper{Phase: "Signals", Every: time.Hour, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Logger:   slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Terminal: ControllingTerminal()}
	code, err := w.Run(context.Background(), exe, "-test.run=^$")
	if err != nil {
		fmt.Fprintln(f, "run:", err)
	}
	return code
}

// phaseRunEnv makes the test binary act as `lavender phase run NAME --url
// URL -- ARGS...` with the exporter at its value, in a process of its own
// whose streams are the wrapper's; see runPhaseRunProcess.
const phaseRunEnv = "LAVENDER_TEST_PHASE_RUN"

// runPhaseRunProcess runs args as the phase "Grandchild" and exits with
// its exit code, as `lavender phase run` does.
func runPhaseRunProcess(url string, args []string) int {
	client, err := NewClient(url)
	if err != nil || len(args) == 0 {
		return 98
	}
	w := &Wrapper{Client: client, Phase: "Grandchild", Every: time.Hour, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	code, err := w.Run(context.Background(), args[0], args[1:]...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
	}
	return code
}

// runChild is the wrapped command of the wrapper tests:
//   - "cat N": copies stdin to stdout, writes to stderr, exits N at EOF;
//   - "trap": says "ready" on stdout, exits 42 on SIGTERM and 43 on SIGINT;
//   - "sleep": says "ready" and waits to be killed;
//   - "count FILE": records each signal it gets in FILE; see countSignals.
func runChild(mode string) int {
	verb, arg, _ := strings.Cut(mode, " ")
	switch verb {
	case "cat":
		code, _ := strconv.Atoi(arg)
		_, _ = io.Copy(os.Stdout, os.Stdin)
		fmt.Fprint(os.Stderr, "child stderr")
		return code
	case "trap":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
		fmt.Println("ready")
		if <-c == syscall.SIGTERM {
			return 42
		}
		return 43
	case "sleep":
		fmt.Println("ready")
		time.Sleep(time.Minute)
		return 0
	case "count":
		return countSignals(arg)
	case "tty":
		return describeStderr()
	}
	return runCauseChild(verb, arg)
}

type wrapperRun struct {
	code int
	err  error
}

// startWrapper runs the test binary as a child in mode under w.
func startWrapper(t *testing.T, w *Wrapper, mode string) <-chan wrapperRun {
	t.Helper()
	t.Setenv(childEnv, mode)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan wrapperRun, 1)
	go func() {
		code, err := w.Run(context.Background(), exe, "-test.run=^$")
		done <- wrapperRun{code, err}
	}()
	return done
}

// startReady is startWrapper with the child's stdout on a pipe: it returns
// once the child has said "ready", so a signal sent then finds it running,
// and throws the rest of that output away.
func startReady(t *testing.T, w *Wrapper, mode string) <-chan wrapperRun {
	t.Helper()
	stdoutR, stdoutW := io.Pipe()
	t.Cleanup(func() { stdoutW.Close() })
	w.Stdout = stdoutW
	done := startWrapper(t, w, mode)
	if line, err := bufio.NewReader(stdoutR).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	go io.Copy(io.Discard, stdoutR)
	return done
}

func waitResult(t *testing.T, done <-chan wrapperRun) wrapperRun {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("wrapper did not return")
		return wrapperRun{}
	}
}

// countSignals writes "ready PID" to file, then one line per SIGINT,
// SIGTERM or SIGHUP it receives, in order ("interrupt", "terminated",
// "hangup"), and exits 0 at SIGWINCH after writing "done". The test sends
// SIGWINCH straight to it once every signal it means to count has been
// sent; WINCH's higher number makes the kernel and Go's runtime deliver any
// pending SIGINT or SIGTERM before it.
func countSignals(file string) int {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return 97
	}
	c := make(chan os.Signal, 16)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH)
	fmt.Fprintf(f, "ready %d\n", os.Getpid())
	for sig := range c {
		if sig == syscall.SIGWINCH {
			fmt.Fprintln(f, "done")
			return 0
		}
		fmt.Fprintln(f, sig)
	}
	return 0
}

func TestWrapperExitCode(t *testing.T) {
	for _, tc := range []struct {
		code   int
		status string
		end    string
	}{
		{0, phaseapi.StatusOK, "END   Train 0s"},
		{3, phaseapi.StatusFailed, "END   Train 0s failed: exit code 3: child stderr"},
	} {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			env := newTestEnv(t)
			srv := env.server()
			client, err := NewClient(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			stdinR, stdinW := io.Pipe()
			var stdout, stderr testkit.SyncBuffer
			w := &Wrapper{Client: client, Phase: "Train", Every: 5 * time.Millisecond,
				Stdin: stdinR, Stdout: &stdout, Stderr: &stderr}
			done := startWrapper(t, w, fmt.Sprintf("cat %d", tc.code))
			if _, err := io.WriteString(stdinW, "batch 1\n"); err != nil {
				t.Fatal(err)
			}
			// Pings arrive while the child runs; then let it finish.
			testkit.WaitFor(t, 20*time.Second, func() bool {
				p, ok := env.phase("Train")
				return ok && p.Heartbeats >= 3
			}, "three heartbeats")
			stdinW.Close()
			r := waitResult(t, done)
			if r.err != nil || r.code != tc.code {
				t.Fatalf("Run = %d, %v; want %d", r.code, r.err, tc.code)
			}
			if stdout.String() != "batch 1\n" || stderr.String() != "child stderr" {
				t.Errorf("streams not passed through: stdout %q stderr %q", stdout.String(), stderr.String())
			}
			p, _ := env.phase("Train")
			if p.Status != tc.status {
				t.Errorf("status %q, want %q", p.Status, tc.status)
			}
			if got, want := env.entries(), []string{"RUN start", "START Train", tc.end}; !equalStrings(got, want) {
				t.Errorf("entries %q, want %q", got, want)
			}
		})
	}
}

func TestWrapperForwardsSignals(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{
		{syscall.SIGTERM, 42},
		{syscall.SIGINT, 43},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			env := newTestEnv(t)
			client, err := NewClient(env.server().URL)
			if err != nil {
				t.Fatal(err)
			}
			w := &Wrapper{Client: client, Phase: "Train", Every: time.Hour}
			done := startReady(t, w, "trap")
			// A real signal to this process, which the wrapper has claimed.
			if err := syscall.Kill(os.Getpid(), tc.sig); err != nil {
				t.Fatal(err)
			}
			r := waitResult(t, done)
			if r.err != nil || r.code != tc.code {
				t.Fatalf("Run = %d, %v; want the child's %d", r.code, r.err, tc.code)
			}
			if p, _ := env.phase("Train"); p.Status != phaseapi.StatusFailed {
				t.Errorf("phase %+v, want failed", p)
			}
		})
	}
}

// A child killed by a forwarded signal gives 128+signal, as in a shell.
func TestWrapperChildKilledBySignal(t *testing.T) {
	env := newTestEnv(t)
	client, _ := NewClient(env.server().URL)
	sigc := make(chan os.Signal, 1)
	w := &Wrapper{Client: client, Phase: "Train", Every: time.Hour, Signals: sigc}
	done := startReady(t, w, "sleep")
	sigc <- syscall.SIGTERM
	r := waitResult(t, done)
	if r.err != nil || r.code != 128+int(syscall.SIGTERM) {
		t.Fatalf("Run = %d, %v; want %d", r.code, r.err, 128+int(syscall.SIGTERM))
	}
}

// countingTransport counts requests, so a test can wait for failed pings.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestWrapperExporterUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	tr := &countingTransport{}
	client, err := NewClient("http://"+addr, WithHTTPClient(&http.Client{Transport: tr, Timeout: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	stdinR, stdinW := io.Pipe()
	var stdout testkit.SyncBuffer
	w := &Wrapper{Client: client, Phase: "Train", Every: time.Millisecond, Stdin: stdinR, Stdout: &stdout,
		Stderr: io.Discard, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	done := startWrapper(t, w, "cat 0")
	io.WriteString(stdinW, "still trains\n")
	testkit.WaitFor(t, 20*time.Second, func() bool { return tr.n.Load() >= 5 }, "failed pings")
	stdinW.Close()
	r := waitResult(t, done)
	if r.err != nil || r.code != 0 || stdout.String() != "still trains\n" {
		t.Fatalf("Run = %d, %v, stdout %q", r.code, r.err, stdout.String())
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings for %d failed requests, want 1:\n%s", n, tr.n.Load(), logs.String())
	}
	if !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("warning does not say why: %s", logs.String())
	}
	// An exporter never reached is not waited for at the end.
	if strings.Contains(logs.String(), waitingLine) {
		t.Errorf("the wrapper waited for an exporter that never answered:\n%s", logs.String())
	}
}

func TestWrapperCannotStart(t *testing.T) {
	env := newTestEnv(t)
	client, _ := NewClient(env.server().URL)
	w := &Wrapper{Client: client, Phase: "Train"}
	code, err := w.Run(context.Background(), "/nonexistent/lavender-test-command")
	if code != ExitNotFound || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Run = %d, %v; want %d and a not-found error", code, err, ExitNotFound)
	}
	dir := t.TempDir()
	script := dir + "/not-executable"
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644)
	if code, err := w.Run(context.Background(), script); code != ExitCannotExecute || err == nil {
		t.Errorf("non-executable: Run = %d, %v; want %d", code, err, ExitCannotExecute)
	}
	w.Phase = "bad\nname"
	if code, err := w.Run(context.Background(), "true"); code != 2 || !errors.Is(err, phaseapi.ErrBadPhaseName) {
		t.Errorf("bad name: Run = %d, %v", code, err)
	}
	if _, phases := env.e.Snapshot(); len(phases) != 0 {
		t.Errorf("heartbeats sent for commands that never ran: %+v", phases)
	}
}

func TestClient(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	c, err := NewClient(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run, err := c.StartRun(ctx, "device=cuda")
	if err != nil || run.File != "run-20261129-120000.log" {
		t.Fatalf("StartRun = %+v, %v", run, err)
	}
	if _, err := c.Heartbeat(ctx, phaseapi.HeartbeatRequest{Phase: "Pretrain", Event: phaseapi.EventStart}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Heartbeat(ctx, phaseapi.HeartbeatRequest{Phase: "Eval", Event: phaseapi.EventEnd})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || !strings.Contains(apiErr.Message, "Eval") {
		t.Errorf("end of unknown phase: %v", err)
	}
	resp, err := c.Phases(ctx)
	if err != nil || len(resp.Phases) != 1 || resp.Run.File != run.File {
		t.Errorf("Phases = %+v, %v", resp, err)
	}
	for _, bad := range []string{"127.0.0.1:98x77", "ftp://host", "http://user:pw@host:1"} {
		if _, err := NewClient(bad); err == nil {
			t.Errorf("NewClient(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}

func TestClientBasicAuth(t *testing.T) {
	var gotUser, gotPass string
	srv := newAuthServer(t, &gotUser, &gotPass)
	c, _ := NewClient(srv, WithBasicAuth("trainer", "s3cret"))
	if _, err := c.Heartbeat(context.Background(), phaseapi.HeartbeatRequest{Phase: "A", Event: phaseapi.EventPing}); err != nil {
		t.Fatal(err)
	}
	if gotUser != "trainer" || gotPass != "s3cret" {
		t.Errorf("server saw %q/%q", gotUser, gotPass)
	}
}

// The command's own client ends the phase while the wrapper runs it: a
// failure stands, the wrapper's refused pings and end (409) are expected
// and never a warning; an ok end of its own followed by a non-zero exit
// fails the phase with the wrapper's reason.
func TestWrapperCommandEndedThePhaseItself(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		inner  phaseapi.HeartbeatRequest
		status string
		reason string
		log    []string
	}{
		{"failed by the command, exit 0", 0,
			phaseapi.HeartbeatRequest{Phase: "Train", Event: phaseapi.EventEnd, Status: phaseapi.StatusFailed, Reason: "RuntimeError: inner"},
			phaseapi.StatusFailed, "RuntimeError: inner", []string{"START Train", "END   Train 0s failed: RuntimeError"}},
		{"ended ok by the command, exit 3", 3,
			phaseapi.HeartbeatRequest{Phase: "Train", Event: phaseapi.EventEnd, Status: phaseapi.StatusOK},
			phaseapi.StatusFailed, "exit code 3: child stderr", []string{"START Train", "END   Train 0s", "END   Train 0s failed: exit code 3: child stderr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			srv := env.server()
			client, err := NewClient(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			var logs testkit.SyncBuffer
			stdinR, stdinW := io.Pipe()
			w := &Wrapper{Client: client, Phase: "Train", Every: 5 * time.Millisecond, Stdin: stdinR, Stdout: io.Discard,
				Stderr: io.Discard, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			done := startWrapper(t, w, fmt.Sprintf("cat %d", tc.code))
			testkit.WaitFor(t, 20*time.Second, func() bool { p, ok := env.phase("Train"); return ok && p.Heartbeats >= 2 }, "pings")
			if _, err := env.e.Apply(tc.inner); err != nil {
				t.Fatal(err)
			}
			// The exporter's answer to a ping after the end says when it ended.
			testkit.WaitFor(t, 20*time.Second, func() bool { return strings.Contains(logs.String(), "ended at") }, "a refused ping")
			stdinW.Close()
			if r := waitResult(t, done); r.err != nil || r.code != tc.code {
				t.Fatalf("Run = %d, %v; want %d", r.code, r.err, tc.code)
			}
			p, _ := env.phase("Train")
			if p.Status != tc.status || p.Reason != tc.reason {
				t.Errorf("phase %s %q, want %s %q", p.Status, p.Reason, tc.status, tc.reason)
			}
			if strings.Contains(logs.String(), "level=WARN") {
				t.Errorf("a warning for the expected answer:\n%s", logs.String())
			}
			if got, want := env.entries(), append([]string{"RUN start"}, tc.log...); !equalStrings(got, want) {
				t.Errorf("entries %q, want %q", got, want)
			}
		})
	}
}
