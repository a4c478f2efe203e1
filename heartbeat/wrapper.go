package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"lavender/phaseapi"
)

// DefaultPingInterval is how often `lavender phase run` pings.
const DefaultPingInterval = 60 * time.Second

// Wrapper runs a command as a training phase, in the style of runitor: it
// sends start, pings every Every while the command runs, and sends end with
// ok or failed by the exit code. The command runs whether or not the
// exporter answers; the wrapper then warns once and carries on.
type Wrapper struct {
	Client *Client
	Phase  string
	Every  time.Duration // default DefaultPingInterval

	// The child's standard streams, passed as they are (an *os.File is
	// inherited directly, so a terminal stays a terminal).
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	Logger *slog.Logger

	// Terminal, if set, is the wrapper's controlling terminal (see
	// ControllingTerminal). When the wrapper's process group is the
	// terminal's foreground group, the command's own process group takes
	// the foreground while it runs, so Ctrl-C reaches the command once
	// (and only the command) and it can read the terminal; Ctrl-Z stops
	// the command and then the wrapper, as a shell expects of its job.
	Terminal *os.File

	// Signals, if set, replaces signal.Notify for the forwarded signals;
	// every signal received on it is forwarded to the child. Tests use it.
	Signals <-chan os.Signal
}

// Exit codes for a command that could not be started, as in POSIX shells.
const (
	ExitCannotExecute = 126
	ExitNotFound      = 127
)

// Run runs name with args and returns its exit code; a command killed by a
// signal gives 128 + the signal number, as in a shell. The error is non-nil
// only if the command could not be started (or the phase name is bad, in
// which case nothing runs).
func (w *Wrapper) Run(ctx context.Context, name string, args ...string) (int, error) {
	phase, err := phaseapi.NormalizePhaseName(w.Phase)
	if err != nil {
		return 2, err
	}
	logger := w.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	every := w.Every
	if every <= 0 {
		every = DefaultPingInterval
	}

	sigc := w.Signals
	if sigc == nil {
		// Registered before the child starts, so no signal can slip through
		// and kill the wrapper while the child runs on.
		c := make(chan os.Signal, 4)
		signal.Notify(c, forwardedSignals...)
		defer signal.Stop(c)
		sigc = c
	}

	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = w.Stdin, w.Stdout, w.Stderr
	job := newJob(w.Terminal, logger)
	job.prepare(cmd)
	unlock := job.lockThread()
	defer unlock()
	if err := cmd.Start(); err != nil {
		code := ExitNotFound
		if errors.Is(err, fs.ErrPermission) {
			code = ExitCannotExecute
		}
		return code, fmt.Errorf("phase run: %w", err)
	}
	done := make(chan struct{})
	job.started(cmd.Process.Pid)
	go job.watchStops(done)
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(done)
	}()

	hb := &heartbeater{client: w.Client, phase: phase, logger: logger}
	stopPings := make(chan struct{})
	var pinger sync.WaitGroup
	pinger.Add(1)
	go func() {
		defer pinger.Done()
		hb.send(ctx, phaseapi.EventStart, "")
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stopPings:
				return
			case <-tick.C:
				hb.send(ctx, phaseapi.EventPing, "")
			}
		}
	}()

wait:
	for {
		select {
		case sig := <-sigc:
			if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
				logger.Warn("could not forward signal", "signal", sig, "err", err)
				continue
			}
			logger.Debug("forwarded signal to the command", "signal", sig)
		case <-done:
			break wait
		}
	}
	job.exited()
	// Let an in-flight start or ping finish (bounded by the client's
	// timeout) so that end never overtakes start.
	close(stopPings)
	pinger.Wait()

	code := exitCode(cmd.ProcessState)
	status := phaseapi.StatusOK
	if code != 0 {
		status = phaseapi.StatusFailed
	}
	hb.send(ctx, phaseapi.EventEnd, status)
	return code, nil
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// heartbeater sends the wrapper's heartbeats and warns about the first
// failure only: a training run must not drown in warnings because the
// exporter is down.
type heartbeater struct {
	client *Client
	phase  string
	logger *slog.Logger

	mu     sync.Mutex
	warned bool
}

func (h *heartbeater) send(ctx context.Context, event, status string) {
	if h.client == nil {
		return
	}
	req := phaseapi.HeartbeatRequest{Phase: h.phase, Event: event, Status: status}
	if event == phaseapi.EventStart {
		req.Dirs = WorkDirs() // the command runs in the wrapper's directory
	}
	_, err := h.client.Heartbeat(ctx, req)
	if err == nil {
		return
	}
	h.mu.Lock()
	first := !h.warned
	h.warned = true
	h.mu.Unlock()
	if first {
		h.logger.Warn("heartbeat failed; the command runs on, further failures are not reported",
			"phase", h.phase, "event", event, "err", err)
		return
	}
	h.logger.Debug("heartbeat failed", "phase", h.phase, "event", event, "err", err)
}
