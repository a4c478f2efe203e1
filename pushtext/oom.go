package pushtext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/watchdog"
)

// OOMFigures describe OOM kills: how many, the victim if the kernel log
// named it and whose process it was, and swap at the time.
type OOMFigures struct {
	Kills      uint64 // 0: unknown
	VictimName string
	VictimPID  int // 0: unknown victim
	// Phase is the phase whose process (or a descendant of it) the victim
	// was; NotAPhase says it was no phase's. Neither: not known. A kill is
	// never put on a phase because the phase was running at the time.
	Phase     string
	NotAPhase bool
	Swap      SwapFigures
	SwapKnown bool
}

// OOM is `OOM killer struck python3 (pid 4242) of phase "Pretrain 1/3" —
// swap 56% full (1.1/2.0 GB)`, `… python3 (pid 4242), not a phase's
// process — …`, with "and 2 more" when it was one of several kills, or
// without a victim `OOM killer struck (1 kill), victim unknown — …`.
// Subject "oom 1 kill".
func OOM(o OOMFigures) Text {
	text := "OOM killer struck"
	switch {
	case o.VictimPID > 0:
		text += fmt.Sprintf(" %s (pid %d)", victimName(o.VictimName), o.VictimPID)
		switch {
		case o.Phase != "":
			text += " of phase " + strconv.Quote(phaseName(o.Phase))
		case o.NotAPhase:
			text += ", not a phase's process"
		}
		if o.Kills > 1 {
			text += fmt.Sprintf(", and %d more", o.Kills-1)
		}
	case o.Kills > 0:
		text += " (" + killsText(o.Kills) + "), victim unknown"
	default:
		text += ", victim unknown"
	}
	if o.SwapKnown {
		text += " — " + swapOrNone(o.Swap)
	}
	return Text{Body: text, Subject: oomSubject(o)}
}

// watchdogOOM is the text of the oom rule's alert: the victim is said to
// be a phase's only when the watchdog judged it one.
func watchdogOOM(a watchdog.Alert) Text {
	o := OOMFigures{Kills: a.Kills, Swap: swapFigures(a.Sample.Swap), SwapKnown: true}
	if a.Victim.Known() {
		o.VictimName, o.VictimPID = a.Victim.Name, a.Victim.PID
		switch a.Victim.Owner {
		case watchdog.VictimOfPhase:
			o.Phase = a.Victim.Phase
		case watchdog.VictimOfNoPhase:
			o.NotAPhase = true
		}
	}
	return OOM(o)
}

func oomSubject(o OOMFigures) string {
	if o.Kills == 0 {
		return string(watchdog.RuleOOM)
	}
	return string(watchdog.RuleOOM) + " " + killsText(o.Kills)
}

func killsText(n uint64) string {
	if n == 1 {
		return "1 kill"
	}
	return strconv.FormatUint(n, 10) + " kills"
}

// victimName keeps a kernel-supplied process name on one short line; the
// message as a whole is sanitized again before it is pushed.
func victimName(name string) string {
	name = oneLine(name)
	if name == "" {
		return "a process"
	}
	return name
}

// oneLine is name sanitized, its runs of white space one space.
func oneLine(name string) string {
	return strings.Join(strings.Fields(textsafe.Sanitize(name)), " ")
}
