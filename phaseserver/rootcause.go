package phaseserver

import (
	"time"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/phaseapi"
)

// rootCauseWindow is how long after a phase failed a later failed end
// with a stronger reason may replace the first one. When one rank of a
// multi-rank job crashes, the launcher signals the others and the peers
// see their connections reset: those ranks often report first, and the
// crash, or torchrun's root cause through `lavender phase run`, seconds
// later (torchrun waits for its workers to exit before it prints it).
const rootCauseWindow = time.Minute

// Reason strengths: how much a failed end's reason says about the cause.
const (
	// reasonHow says only how a process ended: no reason, an exit, a death
	// without an end.
	reasonHow = iota
	// reasonOutside is what the others see when one rank crashes: a
	// signal the launcher sends (SIGTERM, SIGINT, SIGHUP), or a peer's
	// connection reset or closed.
	reasonOutside
	// reasonOwn is a rank's own crash: an exception, an out-of-memory
	// error, a signal that kills outright (SIGKILL, SIGSEGV, SIGABRT).
	reasonOwn
)

var (
	// outsideSignal matches the reasons of a process stopped by a
	// terminating signal someone sent, in the forms the client, the
	// wrapper and torchrun write them, after a rank's prefix.
	outsideSignal = lazyregexp.New(`(?i)^(rank \d+: )?(` +
		`(interrupted by |killed by )?SIG(TERM|INT|HUP)\b.*` +
		`|KeyboardInterrupt\b.*` +
		`|SystemExit: exit status (129|130|143)` +
		`|exit code (129|130|143)\b.*` +
		`|Signal (1|2|15) \(SIG(HUP|INT|TERM)\).*` +
		`|.*\bSignals?\.SIG(TERM|INT|HUP)\b.*)$`)
	// peerGone matches the errors a rank sees when another rank is gone:
	// gloo's and NCCL's connection errors, c10d's store and socket errors.
	peerGone = lazyregexp.New(`(?i)(connection (reset|closed|refused)( by peer)?` +
		`|broken pipe|ECONNRESET|remote process exited|peer (closed|disconnected|hung up)` +
		`|NCCL communicator was aborted|DistNetworkError|DistBackendError.*(closed|reset|abort)` +
		`|ProcessGroupNCCL.*(watchdog|abort)|Socket Timeout|connectFullMesh failed|recvBytes|sendBytes)`)
)

// reasonStrength ranks a failed end's reason (see reasonHow).
func reasonStrength(reason string) int {
	switch {
	case reason == "" || genericReason.MatchString(reason) && !killingSignal.MatchString(reason),
		exitedEarly.MatchString(reason):
		return reasonHow
	case outsideSignal.MatchString(reason) || peerGone.MatchString(reason):
		return reasonOutside
	}
	return reasonOwn
}

// exitedEarly is the client's reason for a process that exited while its
// phase ran: how it ended, not why.
var exitedEarly = lazyregexp.New(`^(rank \d+: )?the process exited before the phase ended$`)

// killingSignal matches a death by a signal nobody sends to stop a job
// politely: the OOM killer's SIGKILL, a crash's SIGSEGV or SIGABRT.
var killingSignal = lazyregexp.New(`(?i)\bSIG(KILL|SEGV|ABRT|BUS|ILL|FPE)\b`)

// strongerReason reports whether reason, of a failed end that came at now,
// replaces the reason the failed phase p keeps: it says more about the
// cause, and came within rootCauseWindow of the failure.
func strongerReason(p phaseapi.Phase, reason string, now time.Time) bool {
	return now.Sub(p.Ended) <= rootCauseWindow && reasonStrength(reason) > reasonStrength(p.Reason)
}
