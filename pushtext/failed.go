package pushtext

import (
	"math"
	"strconv"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/watchdog"
)

// Ending is how a failed phase ended, beyond its duration.
type Ending struct {
	// Reason is why, as its end said ("RuntimeError: CUDA out of memory.
	// Tried to allocate 2.00 GiB", "killed by SIGKILL"); "" if unknown.
	Reason string
	// Died marks a phase whose process (PID) was gone and no end came.
	Died bool
	// Unwatched marks a died phase whose process ended while lavender was
	// down: how it ended is not known, so it is not worded as a failure.
	Unwatched bool
	PID       int64
	// Count > 1 is a push that counts several failures within Window.
	Count  int
	Window time.Duration
	// Loss is the phase's last loss when it is not finite (NaN, ±Inf);
	// nil otherwise. A done push says it: the run ended, but diverged.
	Loss *float64
}

// endingOf reads the ending off a failed or done alert.
func endingOf(a watchdog.Alert) Ending {
	e := Ending{Reason: a.End.Reason, Died: a.End.Died, PID: a.End.PID, Unwatched: a.End.Status == phaseapi.StatusUnknown}
	if l := a.End.Loss; l != nil && (math.IsNaN(float64(*l)) || math.IsInf(float64(*l), 0)) {
		f := float64(*l)
		e.Loss = &f
	}
	if a.Ends > 1 {
		e.Count, e.Window = a.Ends, a.Lasted()
	}
	return e
}

// failed is what follows the name of a failed phase: "failed after 2h13m:
// RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", "died
// without ending after 12m (pid 4242 gone)", "ended while lavender was
// down, its end never arrived (pid 4242 gone)", or, counting several,
// "failed 3 times in 10m: " and the latest reason.
func failed(e Ending, d string) string {
	var text string
	switch {
	case e.Count > 1:
		text = "failed " + strconv.Itoa(e.Count) + " times in " + HumanDuration(e.Window)
	case e.Unwatched:
		return "ended while lavender was down, its end never arrived (pid " + strconv.FormatInt(e.PID, 10) + " gone)"
	case e.Died:
		return "died without ending after " + d + " (pid " + strconv.FormatInt(e.PID, 10) + " gone)"
	default:
		text = "failed after " + d
	}
	if reason := oneLine(e.Reason); reason != "" {
		text += ": " + reason
	}
	return text
}
