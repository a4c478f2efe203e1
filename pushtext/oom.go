package pushtext

import (
	"fmt"
	"strconv"
	"strings"

	"lavender/internal/textsafe"
)

// OOMFigures describe OOM kills: how many, the victim if the kernel log
// named it, the phase they hit, and swap at the time.
type OOMFigures struct {
	Kills      uint64 // 0: unknown
	VictimName string
	VictimPID  int // 0: unknown victim
	Phase      string
	Swap       SwapFigures
	SwapKnown  bool
}

// OOM is `OOM killer struck (1 kill) during "Pretrain 1/3" — swap 56% full
// (1.1/2.0 GB)`; with a victim `OOM killer struck python3 (pid 4242) during
// …`, and "and 2 more" when it was one of several kills. Subject "oom 1
// kill".
func OOM(o OOMFigures) Text {
	text := "OOM killer struck"
	switch {
	case o.VictimPID > 0:
		text += fmt.Sprintf(" %s (pid %d)", victimName(o.VictimName), o.VictimPID)
		if o.Kills > 1 {
			text += fmt.Sprintf(" and %d more", o.Kills-1)
		}
	case o.Kills > 0:
		text += " (" + killsText(o.Kills) + ")"
	}
	if o.Phase != "" {
		text += " during " + strconv.Quote(o.Phase)
	}
	if o.SwapKnown {
		text += " — " + swapOrNone(o.Swap)
	}
	return Text{Body: text, Subject: oomSubject(o)}
}

func oomSubject(o OOMFigures) string {
	if o.Kills == 0 {
		return "oom"
	}
	return "oom " + killsText(o.Kills)
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
