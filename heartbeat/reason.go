package heartbeat

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
)

// maxTailBytes is how much of the command's stderr the wrapper keeps to
// find why it failed: a long traceback, or torchrun's summary after it,
// fits many times over.
const maxTailBytes = 64 << 10

// tailBuffer keeps the last maxTailBytes written to it. The wrapper tees
// the command's stderr into it; it never delays the pass-through.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	cut bool // bytes were dropped before buf
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= maxTailBytes {
		t.buf, t.cut = append(t.buf[:0], p[len(p)-maxTailBytes:]...), true
		return len(p), nil
	}
	if over := len(t.buf) + len(p) - maxTailBytes; over > 0 {
		t.buf, t.cut = append(t.buf[:0], t.buf[over:]...), true
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// Bytes returns the tail, and whether anything before it was dropped
// (its first line is then likely cut).
func (t *tailBuffer) Bytes() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf), t.cut
}

// ansiEscape matches the terminal escapes (colours, cursor moves) that
// tools write even into a pipe.
var ansiEscape = lazyregexp.New(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)`)

// stderrLines splits the tail of stderr into the lines a person would see:
// a carriage return (tqdm redrawing its bar) keeps only what follows it,
// escapes are dropped, and the first line, likely cut by the tail, too.
func stderrLines(tail []byte, cut bool) []string {
	text := ansiEscape.ReplaceAllString(string(tail), "")
	lines := strings.Split(text, "\n")
	if cut && len(lines) > 0 {
		lines = lines[1:]
	}
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		if j := strings.LastIndexByte(l, '\r'); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = strings.TrimRight(l, " \t")
	}
	return lines
}

// stderrReason is the line of the command's stderr that says why it
// failed: torchrun's root cause ("rank 1: RuntimeError: …"), else the last
// exception line of a Python traceback, else the last non-empty line. ""
// if stderr said nothing. fromTraceback tells the first two, which need no
// exit code beside them, from the third.
func stderrReason(tail []byte, cut bool) (reason string, fromTraceback bool) {
	lines := stderrLines(tail, cut)
	if r, ok := torchrunRootCause(lines); ok {
		return r, true
	}
	if r, ok := tracebackException(lines); ok {
		return r, true
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l, false
		}
	}
	return "", false
}

const tracebackHeader = "Traceback (most recent call last):"

// tracebackException is the exception line of the last Python traceback
// in lines: the first line after its header that is not indented (the
// frames are). With chained exceptions ("During handling of the above
// exception…") the last traceback is the one that ended the program.
func tracebackException(lines []string) (string, bool) {
	exc, _, ok := lastTraceback(lines)
	return exc, ok
}

// lastTraceback is tracebackException with the index of its header.
func lastTraceback(lines []string) (exc string, header int, ok bool) {
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.TrimSpace(lines[i]) != tracebackHeader {
			continue
		}
		indent := leadingSpace(lines[i])
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) == "" {
				continue
			}
			if leadingSpace(l) <= indent && !strings.HasPrefix(strings.TrimSpace(l), "^") {
				return strings.TrimSpace(l), i, true
			}
		}
		return "", i, false
	}
	return "", -1, false
}

// workerTraceback is the last traceback before the torchrun block that is
// not the launcher's own ChildFailedError.
func workerTraceback(lines []string) (string, bool) {
	for len(lines) > 0 {
		exc, header, ok := lastTraceback(lines)
		if header < 0 {
			return "", false
		}
		if ok && !strings.Contains(exc, "ChildFailedError") {
			return exc, true
		}
		lines = lines[:header]
	}
	return "", false
}

func leadingSpace(s string) int { return len(s) - len(strings.TrimLeft(s, " \t")) }

var (
	torchrunRank     = lazyregexp.New(`^\s*rank\s*:\s*(\d+)`)
	torchrunExitcode = lazyregexp.New(`^\s*exitcode\s*:\s*(-?\d+)`)
	torchrunTrace    = lazyregexp.New(`^(\s*)traceback\s*:\s*(.*)$`)
)

// torchrunRootCause reads torchrun's "Root Cause (first observed
// failure)" block, the end of a failed torch.distributed.elastic job:
//
//	Root Cause (first observed failure):
//	[0]:
//	  time      : 2026-12-01_03:00:00
//	  host      : gpu-1
//	  rank      : 1 (local_rank: 1)
//	  exitcode  : 1 (pid: 4242)
//	  error_file: /tmp/torchelastic_x/error.json
//	  traceback : Traceback (most recent call last):
//	    File "train.py", line 9, in <module>
//	  RuntimeError: CUDA out of memory. …
//	============================================================
//
// It says "rank 1: " and the worker's exception line, or its signal
// ("Signal 9 (SIGKILL) received by PID 4242"); when the worker recorded no
// error file, the last traceback printed before the block, else its exit
// code.
func torchrunRootCause(lines []string) (string, bool) {
	start := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "Root Cause (first observed failure)") {
			start = i
			break
		}
	}
	if start < 0 {
		return "", false
	}
	var rank, exitcode, trace string
	var traceLines []string
	inTrace := false
	for _, l := range lines[start+1:] {
		t := strings.TrimSpace(l)
		if t != "" && strings.Trim(t, "=") == "" {
			break // the block's closing border
		}
		if inTrace {
			traceLines = append(traceLines, l)
			continue
		}
		if m := torchrunRank.FindStringSubmatch(l); m != nil {
			rank = m[1]
		} else if m := torchrunExitcode.FindStringSubmatch(l); m != nil {
			exitcode = m[1]
		} else if m := torchrunTrace.FindStringSubmatch(l); m != nil {
			trace, inTrace = strings.TrimSpace(m[2]), true
		}
	}
	var cause string
	switch {
	case trace == tracebackHeader:
		cause, _ = tracebackException(append([]string{tracebackHeader}, dedent(traceLines)...))
	case strings.HasPrefix(trace, "To enable traceback"), trace == "", trace == "<N/A>":
		// No error file: the worker's own traceback, if it printed one
		// before the block.
		if r, ok := workerTraceback(lines[:start]); ok {
			cause = r
		} else if exitcode != "" {
			cause = "exit code " + exitcode
		}
	default:
		cause = trace
	}
	if cause == "" {
		return "", false
	}
	if rank != "" {
		cause = "rank " + rank + ": " + cause
	}
	return cause, true
}

// dedent removes the indentation torchrun adds to a worker's traceback.
func dedent(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimPrefix(l, "  ")
	}
	return out
}

// failureReason is why the command failed, as the wrapper tells the
// exporter: a signal the wrapper forwarded wins whatever the exit code (a
// framework may exit 0 on SIGTERM), then a killing signal, then what
// stderr said, with the exit code unless a traceback says enough.
func failureReason(forwarded, killedBy string, code int, tail []byte, cut bool) string {
	if forwarded != "" {
		return "interrupted by " + forwarded
	}
	if killedBy != "" {
		return "killed by " + killedBy
	}
	line, traceback := stderrReason(tail, cut)
	switch {
	case traceback:
		return line
	case code > 128 && code <= 128+64 && signalName(code-128) != "":
		// A shell reports a child killed by signal N as exit status 128+N.
		return fmt.Sprintf("killed by %s (exit code %d)", signalName(code-128), code)
	case line != "":
		return fmt.Sprintf("exit code %d: %s", code, line)
	}
	return fmt.Sprintf("exit code %d", code)
}
