package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lavender-ml/lavender/internal/backoff"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/proctree"
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
	// inherited directly, so a terminal stays a terminal). Stdin and Stdout
	// that are not files go through pipes that os/exec copies, and Run
	// then waits for their end, which a process the command started may
	// hold off; lavender passes files. Stderr may be any writer: see
	// stderrTee.handOff.
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

	// endRetry, when set, replaces the waits between the tries of the
	// end (defaultEndRetry). Tests use it.
	endRetry *endRetry
}

// endRetry is how the wrapper tries its end again while the exporter does
// not answer: waits from first doubling to ceiling, for at most budget.
type endRetry struct {
	first, ceiling, budget time.Duration
}

// defaultEndRetry covers a restart of the exporter: systemd's RestartSec=5s
// and a start of a few seconds, with room to spare. An end lost there
// leaves a run that exited 0 for the restarted exporter to find gone.
var defaultEndRetry = endRetry{first: 250 * time.Millisecond, ceiling: 5 * time.Second, budget: EndRetryFor}

// EndRetryFor bounds how long `lavender phase run` waits, once the command
// has exited, for an exporter that does not answer to take the end.
const EndRetryFor = time.Minute

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
	cmd.Stdin, cmd.Stdout = w.Stdin, w.Stdout
	cmd.Env = commandEnv(os.Environ(), w.Client, phase)
	// stderr is teed, raw bytes as they come (tqdm's carriage returns and
	// all), so that the wrapper can tell why the command failed; stdout
	// goes to the command as it is.
	stderrR, stderrW, err := stderrPipe(w.Stderr)
	if err != nil {
		return ExitCannotExecute, fmt.Errorf("phase run: stderr pipe: %w", err)
	}
	cmd.Stderr = stderrW
	job := newJob(w.Terminal, logger)
	job.prepare(cmd)
	unlock := job.lockThread()
	defer unlock()
	if err := cmd.Start(); err != nil {
		stderrR.Close()
		stderrW.Close()
		code := ExitNotFound
		if errors.Is(err, fs.ErrPermission) {
			code = ExitCannotExecute
		}
		return code, fmt.Errorf("phase run: %w", err)
	}
	stderrW.Close() // the command holds the write end now
	tee := newStderrTee(stderrR, w.Stderr)
	go tee.run()
	done := make(chan struct{})
	job.started(cmd.Process.Pid)
	go job.watchStops(done)
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(done)
	}()

	hb := &heartbeater{client: w.Client, phase: phase, logger: logger}
	start := startRequest(phase, cmd.Process.Pid, logger)
	stopPings := make(chan struct{})
	var pinger sync.WaitGroup
	pinger.Add(1)
	go func() {
		defer pinger.Done()
		hb.send(ctx, start)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stopPings:
				return
			case <-tick.C:
				hb.send(ctx, phaseapi.HeartbeatRequest{Phase: phase, Event: phaseapi.EventPing})
			}
		}
	}()

	var forwarded os.Signal // the first signal passed on to the command
wait:
	for {
		select {
		case sig := <-sigc:
			if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
				logger.Warn("could not forward signal", "signal", sig, "err", err)
				continue
			}
			if forwarded == nil {
				forwarded = sig
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

	// The command is gone: what it wrote is in the pipe already, and is
	// read now, without waiting for a process it started that still holds
	// stderr open. Such a process is not waited for: the phase ends now,
	// before the exporter, seeing the command's pid gone, ends it as died.
	held := tee.finish(logger)

	code := exitCode(cmd.ProcessState)
	end := phaseapi.HeartbeatRequest{Phase: phase, Event: phaseapi.EventEnd, Status: phaseapi.StatusOK}
	if code != 0 || forwarded != nil {
		// A forwarded signal fails the phase whatever the exit code:
		// Lightning exits 0 on SIGTERM and Ctrl-C.
		data, cut := tee.tail.Bytes()
		end.Status = phaseapi.StatusFailed
		end.Reason = phaseapi.CleanReason(failureReason(nameOf(forwarded), killedBy(cmd.ProcessState), code, data, cut))
	}
	if held {
		tee.handOff(logger)
	} else {
		stderrR.Close()
	}
	retry := defaultEndRetry
	if w.endRetry != nil {
		retry = *w.endRetry
	}
	hb.sendEnd(ctx, end, retry, sigc)
	return code, nil
}

// stderrStuck bounds the wait for the copy of the command's stderr to
// stop once the command has exited: it stops at once unless writing to
// the wrapper's own stderr blocks (a terminal held with Ctrl-S, a pipe
// nobody reads).
const stderrStuck = 2 * time.Second

// maxReadyBytes bounds what is read of stderr once the command has exited,
// should a process it started keep writing as fast as it is read.
const maxReadyBytes = 1 << 20

// stderrTee copies the command's stderr to out as it comes, each read
// written at once, and keeps its tail for the failure reason. A failing
// out (a closed terminal) does not stop the copy: the command must not
// block on a full pipe.
type stderrTee struct {
	r    *os.File
	out  io.Writer
	tail tailBuffer

	stopping chan struct{} // closed when the command has exited
	done     chan struct{} // closed when run returns
	ended    bool          // set before done closes: no process holds stderr open
	// abandoned is set if run did not stop in time; it then reads no more.
	abandoned atomic.Bool
}

func newStderrTee(r *os.File, out io.Writer) *stderrTee {
	return &stderrTee{r: r, out: out, stopping: make(chan struct{}), done: make(chan struct{})}
}

func (t *stderrTee) run() {
	defer close(t.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := t.r.Read(buf)
		t.pass(buf[:n])
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && t.stopped():
			t.ended = t.readReady(buf)
			return
		default:
			// End of file, or EIO from a pseudo-terminal that no process
			// holds any more.
			t.ended = true
			return
		}
	}
}

func (t *stderrTee) stopped() bool {
	select {
	case <-t.stopping:
		return true
	default:
		return false
	}
}

func (t *stderrTee) pass(p []byte) {
	if len(p) == 0 {
		return
	}
	if t.out != nil {
		_, _ = t.out.Write(p)
	}
	_, _ = t.tail.Write(p)
}

// readReady passes on what stderr holds now, without waiting for more,
// and tells whether it has ended (no process holds it open any more).
func (t *stderrTee) readReady(buf []byte) (ended bool) {
	for total := 0; total < maxReadyBytes; {
		if t.abandoned.Load() {
			return false
		}
		n, ended := readNow(t.r, buf)
		if n == 0 {
			return ended
		}
		t.pass(buf[:n])
		total += n
	}
	return false
}

// finish stops the copy once the command has exited, after reading what
// stderr holds now, and tells whether a process the command started still
// holds it open. A pending read is interrupted by a deadline in the past.
func (t *stderrTee) finish(logger *slog.Logger) (held bool) {
	close(t.stopping)
	if err := t.r.SetReadDeadline(time.Unix(1, 0)); err != nil {
		logger.Debug("cannot interrupt the read of the command's stderr", "err", err)
	}
	select {
	case <-t.done:
		return !t.ended
	case <-time.After(stderrStuck):
		t.abandoned.Store(true)
		logger.Debug("writing the command's stderr blocks; the phase ends without the rest of it")
		return true
	}
}

// handOff keeps stderr read after the wrapper is done with it, for the
// processes of the command that still hold it open, until the last one
// closes it: once the wrapper exits, nobody else would read it, so their
// next write would die of SIGPIPE (or block on a full pipe) where without
// the wrapper it reached the wrapper's stderr. A process of its own (see
// startRelay) copies it there; failing that, a goroutine does, which
// lasts as long as this process does. The relay takes ownership of r.
func (t *stderrTee) handOff(logger *slog.Logger) {
	out, isFile := t.out.(*os.File)
	if isFile || t.out == nil {
		pid, err := startRelay(t.r, out)
		if err == nil {
			t.r.Close()
			logger.Debug("a process the command started still holds its stderr open; a relay passes it on", "relay_pid", pid)
			return
		}
		logger.Debug("could not start a process to pass on the command's stderr; this process passes it on while it lasts", "err", err)
	}
	go func() {
		defer t.r.Close()
		<-t.done // one writer at a time
		_ = t.r.SetReadDeadline(time.Time{})
		buf := make([]byte, 32<<10)
		for {
			n, err := t.r.Read(buf)
			if n > 0 && t.out != nil {
				_, _ = t.out.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
}

// commandEnv is the command's environment: the wrapper's, with
// LAVENDER_URL (the exporter's base URL, without a trailing slash) and
// LAVENDER_PHASE, so that a client inside reports into this phase.
func commandEnv(env []string, client *Client, phase string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if strings.HasPrefix(kv, EnvURL+"=") || strings.HasPrefix(kv, EnvPhase+"=") {
			continue
		}
		out = append(out, kv)
	}
	if client != nil {
		out = append(out, EnvURL+"="+client.BaseURL())
	}
	return append(out, EnvPhase+"="+phase)
}

// The environment `lavender phase run` gives its command.
const (
	EnvURL   = "LAVENDER_URL"
	EnvPhase = "LAVENDER_PHASE"
)

// startRequest is the wrapper's start: the command's pid, with this
// host's boot id and pid namespace so the exporter may judge it, and the
// directory it runs in.
func startRequest(phase string, pid int, logger *slog.Logger) phaseapi.HeartbeatRequest {
	req := phaseapi.HeartbeatRequest{Phase: phase, Event: phaseapi.EventStart}
	p := int64(pid)
	req.PID = &p
	if host, err := proctree.ReadHost(""); err == nil {
		req.BootID, req.PIDNS = host.BootID, host.PIDNS
	} else {
		logger.Debug("the exporter will not judge the command's pid", "err", err)
	}
	req.Dirs = WorkDirs() // the command runs in the wrapper's directory
	return req
}

func nameOf(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := signalName(int(s)); name != "" {
			return name
		}
	}
	if sig == nil {
		return ""
	}
	return sig.String()
}

// killedBy names the signal that killed the command, "" if it exited.
func killedBy(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nameOf(ws.Signal())
	}
	return ""
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

	// answered is set once the exporter answered a heartbeat (any
	// status): only then is it worth waiting for at the end.
	answered atomic.Bool

	mu         sync.Mutex
	warned     bool
	conflicted bool // the exporter said the phase had ended (409)
}

func (h *heartbeater) send(ctx context.Context, req phaseapi.HeartbeatRequest) {
	if h.client == nil {
		return
	}
	h.report(req, h.post(ctx, req))
}

// post sends one heartbeat and notes whether the exporter answered.
func (h *heartbeater) post(ctx context.Context, req phaseapi.HeartbeatRequest) error {
	_, err := h.client.Heartbeat(ctx, req)
	var apiErr *APIError
	if err == nil || errors.As(err, &apiErr) {
		h.answered.Store(true)
	}
	return err
}

// sendEnd sends the end, and tries it again while the exporter that
// answered during the run does not answer now (a restart), for at most
// retry.budget: the end is the news, and one lost leaves a run that
// exited 0 for the exporter to find gone. One line says the wrapper
// waits. An exporter never reached is not waited for: the command ran
// without it, and the wrapper exits as it would have. A signal to the
// wrapper stops the wait.
func (h *heartbeater) sendEnd(ctx context.Context, req phaseapi.HeartbeatRequest, retry endRetry, stop <-chan os.Signal) {
	if h.client == nil {
		return
	}
	err := h.post(ctx, req)
	if err == nil || !exporterAway(err) || !h.answered.Load() {
		h.report(req, err)
		return
	}
	h.logger.Info("the exporter does not answer; waiting for it to take the phase's end", "phase", h.phase, "for", retry.budget, "err", err)
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, retry.budget)
	defer cancel()
	var wait time.Duration
	for {
		wait = backoff.Next(wait, retry.first, retry.ceiling)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			h.logger.Warn("the exporter did not come back; the phase's end is lost", "phase", h.phase, "status", req.Status, "waited", time.Since(began).Round(time.Second), "err", err)
			return
		case sig := <-stop:
			timer.Stop()
			h.logger.Warn("stopped waiting for the exporter; the phase's end is lost", "phase", h.phase, "status", req.Status, "signal", sig)
			return
		case <-timer.C:
		}
		if err = h.post(ctx, req); err == nil || !exporterAway(err) {
			h.logger.Debug("the exporter answered the end", "phase", h.phase, "after", time.Since(began).Round(time.Millisecond))
			h.report(req, err)
			return
		}
	}
}

// exporterAway says whether err is the exporter being away (not
// listening, the connection cut, no answer in time, or a 5xx) rather than
// an answer that stands (a 4xx: the request itself was refused).
func exporterAway(err error) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode >= 500
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// report logs the outcome of a heartbeat as send describes.
func (h *heartbeater) report(req phaseapi.HeartbeatRequest, err error) {
	if err == nil {
		return
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusConflict {
		// A client inside the command ended the phase itself (failed: a
		// callback that saw the exception the framework then swallowed),
		// so the wrapper's pings and ok end are refused: that is expected,
		// and its failure stands. Said once, never as a warning.
		h.mu.Lock()
		first := !h.conflicted
		h.conflicted = true
		h.mu.Unlock()
		if first {
			h.logger.Info("the command ended the phase itself; its end stands", "phase", h.phase, "event", req.Event, "answer", apiErr.Message)
		} else {
			h.logger.Debug("the command ended the phase itself", "phase", h.phase, "event", req.Event, "answer", apiErr.Message)
		}
		return
	}
	h.mu.Lock()
	first := !h.warned
	h.warned = true
	h.mu.Unlock()
	if first {
		h.logger.Warn("heartbeat failed; the command runs on, further failures are not reported",
			"phase", h.phase, "event", req.Event, "err", err)
		return
	}
	h.logger.Debug("heartbeat failed", "phase", h.phase, "event", req.Event, "err", err)
}
