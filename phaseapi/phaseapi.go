// Package phaseapi is the heartbeat API's wire format: its paths, the
// request and answer bodies, the events and statuses, and the rule for a
// phase name. The phase server serves it and package heartbeat speaks it;
// both import this package and neither imports the other, so a client build
// does not pull in the server and the server does not pull in the process
// wrapper. Its Phase and PhaseEnd are also the one form of a phase and of
// its end that the phase server, the watchdog and the status page share.
// Of lavender's packages it imports only internal/textsafe.
package phaseapi

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultPort is the port lavender listens on unless told otherwise, and
// so where a client looks for the API by default.
const DefaultPort = "9877"

// API paths.
const (
	HeartbeatPath = "/api/v1/heartbeat"
	RunsPath      = "/api/v1/runs"
	PhasesPath    = "/api/v1/phases"
)

// MaxRequestBytes bounds an API request body; a heartbeat is under 200 bytes.
const MaxRequestBytes = 64 << 10

// MaxPhaseNameBytes bounds one phase name after trimming.
const MaxPhaseNameBytes = 64

// Heartbeat events and end statuses, as posted to /api/v1/heartbeat.
const (
	EventStart = "start"
	EventPing  = "ping"
	EventEnd   = "end"

	StatusActive = "active" // only in answers: the phase has not ended
	StatusOK     = "ok"
	StatusFailed = "failed"
	// StatusUnknown is only in answers: the phase's process ended while
	// no lavender watched it and its end never came, so how it ended is
	// not known. A late end, ok or failed, still settles it.
	StatusUnknown = "unknown"
)

// ErrBadPhaseName is the error of a name NormalizePhaseName refuses.
var ErrBadPhaseName = errors.New("bad phase name")

// HeartbeatRequest is the body of POST /api/v1/heartbeat.
//
// Step and Total are optional progress: Step counts from 0, Total is at
// least 1, and Step may not exceed the Total sent with it. A Step sent
// alone past the total the phase has drops that total. Pointers tell "not
// sent" from 0.
//
// The other fields are optional too; see their types and Check for the
// events each goes with. Reason is never a cause to refuse an end: the
// server cleans it (CleanReason) instead.
type HeartbeatRequest struct {
	Phase  string  `json:"phase"`
	Event  string  `json:"event"`            // start, ping or end
	Status string  `json:"status,omitempty"` // ok or failed, with end only; default ok
	Step   *uint64 `json:"step,omitempty"`
	Total  *uint64 `json:"total,omitempty"`

	// Reason says why the phase ended (end only), mostly for failed.
	Reason string `json:"reason,omitempty"`
	// PID is the process doing the work (start, ping), BootID and PIDNS
	// where it runs: the server judges the pid only on its own host and
	// pid namespace.
	PID    *int64 `json:"pid,omitempty"`
	BootID string `json:"boot_id,omitempty"`
	PIDNS  string `json:"pid_ns,omitempty"`
	// Dirs are the directories the phase writes to (start, ping).
	Dirs []string `json:"dirs,omitempty"`
	// SaveBytes is the size of a checkpoint save that just finished (ping).
	SaveBytes *uint64 `json:"save_bytes,omitempty"`
	// Loss is the latest training loss (start, ping, end).
	Loss *Loss `json:"loss,omitempty"`
	// EvalStep and EvalTotal are the evaluation loop's progress (ping);
	// EvalTotal goes with EvalStep.
	EvalStep  *uint64 `json:"eval_step,omitempty"`
	EvalTotal *uint64 `json:"eval_total,omitempty"`
	// Busy names the work the training thread does between two steps
	// ("evaluating", "saving"), sent on a ping only while the client saw
	// that thread move since its last ping: it counts as progress.
	Busy string `json:"busy,omitempty"`
}

// HeartbeatResponse answers POST /api/v1/heartbeat: the phase as it now
// stands, and a warning when the heartbeat was taken without a part of it
// (an end whose step and total contradict each other: the end counts more
// than its progress, so it is recorded and the progress left out).
type HeartbeatResponse struct {
	Phase
	Warning string `json:"warning,omitempty"`
}

// RunRequest is the body of POST /api/v1/runs.
type RunRequest struct {
	Header string `json:"header,omitempty"`
}

// RunResponse answers POST /api/v1/runs.
type RunResponse struct {
	Run Run `json:"run"`
}

// PhasesResponse answers GET /api/v1/phases.
type PhasesResponse struct {
	Run    *Run    `json:"run"` // null before the first run
	Phases []Phase `json:"phases"`
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

// Run identifies the run whose phases the phase server holds.
type Run struct {
	File    string    `json:"file"` // base name of the run log
	Started time.Time `json:"started"`
	// Resumed is when this process took the run over, at its start, from
	// the table a process that had stopped saved (serve --run.resume, the
	// exporter's restart); zero for a run it started or followed from a
	// live writer. The pings of its phases sent before it reached no one.
	// Never on the wire: the phase server and the watchdog share it.
	Resumed time.Time `json:"-"`
}

// Phase is one training phase as the API reports it.
type Phase struct {
	Name            string    `json:"name"`
	Status          string    `json:"status"` // active, ok or failed
	Started         time.Time `json:"started"`
	LastHeartbeat   time.Time `json:"last_heartbeat"`
	Ended           time.Time `json:"ended,omitzero"`
	Heartbeats      uint64    `json:"heartbeats"`
	DurationSeconds float64   `json:"duration_seconds"` // elapsed while active, final once ended
	// Reason is why the phase ended, as its end said (cleaned), or what
	// the server found: "died without ending (pid 4242 gone)".
	Reason string `json:"reason,omitempty"`
	// Failures counts the phase's failed ends in this run (an end with
	// status failed, or its process found dead), and LastFailure is the
	// latest of them. A new start of the phase keeps both: a failure that
	// a retry loop starts again before anyone looked still counts.
	Failures    uint64   `json:"failures,omitzero"`
	LastFailure *Failure `json:"last_failure,omitempty"`

	Progress
	Process
	Work
}

// Failure is one failed run of a phase: when it started and ended, and
// why, as its end said or the server found. It is replaced, never written
// through: copies of a Phase share it.
type Failure struct {
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	Reason  string    `json:"reason,omitempty"`
}

// Progress is what a phase has reported of its steps. Every field is absent
// from the JSON until the phase reports a step.
type Progress struct {
	// Step is the last step reported, nil until one is. It is replaced,
	// never written through: copies of a Phase share it.
	Step *uint64 `json:"step,omitempty"`
	// Total is the number of steps, 0 while unknown.
	Total uint64 `json:"total,omitzero"`
	// ProgressAt is when the step last moved (or was first reported).
	ProgressAt time.Time `json:"last_progress,omitzero"`
	// Advances counts the heartbeats whose step was above the one before.
	Advances uint64 `json:"advances,omitzero"`
	// Rate is the smoothed rate in steps per second; see docs/phases.md,
	// "Progress and ETA".
	Rate float64 `json:"steps_per_second,omitzero"`
	// RateWeight is how much history stands behind Rate, 0–1: the weight
	// the next interval's own rate is measured against.
	RateWeight float64 `json:"rate_weight,omitzero"`
	// GapSeconds is the interval between the last two advances; the rate
	// starts to decay only once a wait exceeds it.
	GapSeconds float64 `json:"advance_interval_seconds,omitzero"`
	// ETASeconds is the estimated time to Total, nil without one. It is
	// set only in answers, while the phase runs with a known Total after
	// two advancing heartbeats; at the total it is 0, as the metric says.
	ETASeconds *float64 `json:"eta_seconds,omitempty"`
}

// HasStep reports whether the phase has reported a step.
func (p Progress) HasStep() bool { return p.Step != nil }

// StepNow is the last step reported, 0 before any.
func (p Progress) StepNow() uint64 {
	if p.Step == nil {
		return 0
	}
	return *p.Step
}

// Active reports whether the phase has not ended.
func (p Phase) Active() bool { return p.Status == StatusActive }

// NormalizePhaseName trims name and checks it is 1–64 bytes of printable
// UTF-8, the bound that keeps the phase label readable and the run-log line
// within its 80 bytes.
func NormalizePhaseName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", fmt.Errorf("%w: empty", ErrBadPhaseName)
	case len(name) > MaxPhaseNameBytes:
		return "", fmt.Errorf("%w: %d bytes, more than %d", ErrBadPhaseName, len(name), MaxPhaseNameBytes)
	case !utf8.ValidString(name):
		return "", fmt.Errorf("%w: not valid UTF-8", ErrBadPhaseName)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return "", fmt.Errorf("%w: unprintable character %U", ErrBadPhaseName, r)
		}
	}
	return name, nil
}
