package phaseapi

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lavender-ml/lavender/internal/textsafe"
)

// Bounds of the optional heartbeat fields.
const (
	// MaxReasonChars bounds a reason after cleaning, in characters.
	MaxReasonChars = 200
	// MaxDirs bounds the directories of one heartbeat, and of a phase.
	MaxDirs = 8
	// MaxDirBytes bounds one directory, Linux's PATH_MAX.
	MaxDirBytes = 4096
	// MaxSaves is how many checkpoint saves a phase remembers.
	MaxSaves = 8
	// MaxPID is Linux's PID_MAX_LIMIT; no system has pids above it.
	MaxPID = 1 << 22
	// maxIDBytes bounds boot_id (a UUID) and pid_ns ("pid:[4026531836]").
	maxIDBytes = 64
)

// ErrBadField is the error of a heartbeat field Check refuses.
var ErrBadField = errors.New("bad field")

// Loss is a training loss. JSON has no NaN or infinities, so those travel
// as the strings "NaN", "Infinity" and "-Infinity"; a finite loss is a
// plain number.
type Loss float64

// The strings that stand for the non-finite losses.
const (
	LossNaN         = "NaN"
	LossInfinity    = "Infinity"
	LossNegInfinity = "-Infinity"
)

// MarshalJSON writes a finite loss as a number, any other as its string.
func (l Loss) MarshalJSON() ([]byte, error) {
	f := float64(l)
	switch {
	case math.IsNaN(f):
		return []byte(`"` + LossNaN + `"`), nil
	case math.IsInf(f, 1):
		return []byte(`"` + LossInfinity + `"`), nil
	case math.IsInf(f, -1):
		return []byte(`"` + LossNegInfinity + `"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// UnmarshalJSON reads a number or one of the three strings; anything else
// (another string, a number past float64's range) is an ErrBadField.
func (l *Loss) UnmarshalJSON(data []byte) error {
	text := strings.TrimSpace(string(data))
	if strings.HasPrefix(text, `"`) {
		s, err := strconv.Unquote(text)
		switch {
		case err == nil && s == LossNaN:
			*l = Loss(math.NaN())
			return nil
		case err == nil && s == LossInfinity:
			*l = Loss(math.Inf(1))
			return nil
		case err == nil && s == LossNegInfinity:
			*l = Loss(math.Inf(-1))
			return nil
		}
		return fmt.Errorf("%w: loss must be a number or one of %q, %q and %q, not the string %s", ErrBadField, LossNaN, LossInfinity, LossNegInfinity, clip(text, 40))
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return fmt.Errorf("%w: loss must be a number within float64's range or one of %q, %q and %q, not %s", ErrBadField, LossNaN, LossInfinity, LossNegInfinity, clip(text, 40))
	}
	*l = Loss(f)
	return nil
}

// Finite reports whether the loss is a number.
func (l Loss) Finite() bool { return !math.IsNaN(float64(l)) && !math.IsInf(float64(l), 0) }

// String is the loss as the API writes it, unquoted.
func (l Loss) String() string {
	b, _ := l.MarshalJSON()
	return strings.Trim(string(b), `"`)
}

// Process is the process doing a phase's work, as its start (or a ping)
// named it. The server judges it (alive? an ancestor of another pid?)
// only when BootID and PIDNS are its own.
type Process struct {
	PID    int64  `json:"pid,omitempty"`
	BootID string `json:"boot_id,omitempty"`
	PIDNS  string `json:"pid_ns,omitempty"`
	// PIDStartTicks is the process's start time (field 22 of
	// /proc/<pid>/stat, clock ticks after boot), recorded when the server
	// first judged the pid: a later process that reuses the pid has
	// another, and is not taken for this one.
	PIDStartTicks uint64 `json:"pid_start_ticks,omitempty"`
}

// Work is what a phase reported beside its steps: where it writes, its
// checkpoint saves, its loss and its evaluation's progress. Every field is
// absent from the JSON until reported. Pointers and slices are replaced,
// never written through: copies of a Phase share them.
type Work struct {
	Dirs []string `json:"dirs,omitempty"`
	// SaveBytes is the size of the newest save; Saves the last MaxSaves,
	// oldest first.
	SaveBytes *uint64 `json:"save_bytes,omitempty"`
	Saves     []Save  `json:"saves,omitempty"`
	Loss      *Loss   `json:"loss,omitempty"`
	// EvalStep and EvalTotal are the evaluation loop's progress (EvalTotal
	// 0 while unknown); EvalProgressAt is when EvalStep last changed.
	EvalStep       *uint64   `json:"eval_step,omitempty"`
	EvalTotal      uint64    `json:"eval_total,omitzero"`
	EvalProgressAt time.Time `json:"last_eval_progress,omitzero"`
	// Busy is the work between steps the last busy ping named, BusyAt when
	// such a ping last came: work seen moving.
	Busy   string    `json:"busy,omitempty"`
	BusyAt time.Time `json:"last_busy,omitzero"`
}

// Save is one checkpoint save a phase reported.
type Save struct {
	Bytes uint64    `json:"bytes"`
	At    time.Time `json:"at"`
}

// CleanReason makes any text a reason fit to show: line breaks and other
// white space become single spaces; control characters, invalid UTF-8 and
// the hidden characters pushes drop (bidi overrides, zero-width spaces; see
// internal/textsafe) become U+FFFD, so the record shows where something
// was. The joiners emoji and scripts need are kept, as in a push. The ends
// are trimmed, and a reason over MaxReasonChars characters is cut on a
// character boundary with "…". It never fails: an end is never refused
// for its reason.
func CleanReason(s string) string {
	s = textsafe.ReplaceHidden(s, string(utf8.RuneError))
	var b strings.Builder
	space := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case unicode.IsSpace(r):
			space = true
			continue
		case r == utf8.RuneError, unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cs, r), unicode.Is(unicode.Co, r):
			r = utf8.RuneError
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return TruncateChars(b.String(), MaxReasonChars)
}

// TruncateChars cuts s to at most n characters, the last one "…" when
// anything was cut.
func TruncateChars(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut, count := 0, 0
	for i := range s {
		if count == n-1 {
			cut = i
			break
		}
		count++
	}
	return strings.TrimRightFunc(s[:cut], unicode.IsSpace) + "…"
}

// MaxBusyBytes bounds busy: a word or two ("evaluating", "pushing to the hub").
const MaxBusyBytes = 32

// Check checks the optional fields of a heartbeat against its event (which
// the caller has checked): pid on start and ping, 1 to MaxPID, boot_id and
// pid_ns only with it; dirs on start and ping, at most MaxDirs absolute
// paths; save_bytes, eval_step and eval_total on ping, eval_total 1 or
// more and with eval_step, which may not exceed it; busy on ping, 1 to
// MaxBusyBytes printable ASCII characters; loss on any event;
// reason on end. The error wraps ErrBadField and names the field. Reason
// is checked for its event only: its text is cleaned, never refused.
func (r HeartbeatRequest) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadField}, args...)...)
	}
	only := func(field string, set bool, events ...string) error {
		if set && !slices.Contains(events, r.Event) {
			return bad("%s goes only with the %s event", field, strings.Join(events, " or "))
		}
		return nil
	}
	for _, c := range []struct {
		field  string
		set    bool
		events []string
	}{
		{"reason", r.Reason != "", []string{EventEnd}},
		{"pid", r.PID != nil, []string{EventStart, EventPing}},
		{"dirs", r.Dirs != nil, []string{EventStart, EventPing}},
		{"save_bytes", r.SaveBytes != nil, []string{EventPing}},
		{"eval_step", r.EvalStep != nil, []string{EventPing}},
		{"eval_total", r.EvalTotal != nil, []string{EventPing}},
		{"busy", r.Busy != "", []string{EventPing}},
	} {
		if err := only(c.field, c.set, c.events...); err != nil {
			return err
		}
	}
	if r.PID != nil && (*r.PID < 1 || *r.PID > MaxPID) {
		return bad("pid must be 1 to %d, not %d", MaxPID, *r.PID)
	}
	for _, id := range []struct{ field, value string }{{"boot_id", r.BootID}, {"pid_ns", r.PIDNS}} {
		v := strings.TrimSpace(id.value)
		switch {
		case id.value == "":
		case r.PID == nil:
			return bad("%s goes only with pid", id.field)
		case v == "" || len(v) > maxIDBytes || strings.IndexFunc(v, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0:
			return bad("%s must be 1 to %d printable ASCII characters, not %s", id.field, maxIDBytes, clip(strconv.QuoteToASCII(id.value), 80))
		}
	}
	if len(r.Dirs) > MaxDirs {
		return bad("dirs lists %d directories, more than %d", len(r.Dirs), MaxDirs)
	}
	for _, d := range r.Dirs {
		if err := checkDir(d); err != nil {
			return bad("dirs: %w", err)
		}
	}
	if r.Busy != "" && (len(r.Busy) > MaxBusyBytes || strings.IndexFunc(r.Busy, func(c rune) bool { return c < 0x20 || c > 0x7e }) >= 0) {
		return bad("busy must be 1 to %d printable ASCII characters, not %s", MaxBusyBytes, clip(strconv.QuoteToASCII(r.Busy), 80))
	}
	if r.EvalTotal != nil {
		switch {
		case *r.EvalTotal == 0:
			return bad("eval_total must be 1 or more, not 0")
		case r.EvalStep == nil:
			return bad("eval_total goes only with eval_step")
		case *r.EvalStep > *r.EvalTotal:
			return bad("eval_step %d is past the eval_total of %d", *r.EvalStep, *r.EvalTotal)
		}
	}
	return nil
}

func checkDir(d string) error {
	switch {
	case d == "":
		return errors.New("an empty path")
	case len(d) > MaxDirBytes:
		return fmt.Errorf("a path of %d bytes, more than %d", len(d), MaxDirBytes)
	case !strings.HasPrefix(d, "/"):
		return fmt.Errorf("%s is not an absolute path", clip(strconv.Quote(d), 80))
	case strings.IndexFunc(d, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }) >= 0:
		return fmt.Errorf("%s has a control character", clip(strconv.QuoteToASCII(d), 80))
	}
	return nil
}

// CleanDirs returns dirs cleaned (path.Clean) without repeats, in order.
func CleanDirs(dirs []string) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		d = path.Clean(d)
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// clip shortens s for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
