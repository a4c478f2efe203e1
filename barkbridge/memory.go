package barkbridge

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/alertmanager/template"
)

// The Prometheus alerts that carry the same texts as the watchdog's
// pressure and OOM rules (alerts.yml), and their machine-readable
// annotations: plain decimals, as for the swap alert.
const (
	PressureAlertname = "MemoryPressureHigh"
	OOMAlertname      = "OOMKill"

	annotationPressure       = "pressure_ratio"
	annotationPressureWindow = "pressure_window_seconds"
	annotationOOMKills       = "oom_kills"
	annotationActivePhase    = "active_phase"

	// considerIntervening ends the texts that ask a person to act before
	// the kernel does.
	considerIntervening = " — consider intervening"
)

// PressureFigures describe memory pressure and the swap beside it.
type PressureFigures struct {
	Ratio  float64       // PSI "some" over Window, 0–1
	Window time.Duration // 10s for the watchdog's avg10, 1m for the alert's rate
	// Swap: TotalBytes 0 with SwapKnown means the host has no swap.
	Swap      SwapFigures
	SwapKnown bool
}

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

// pressureText is "memory pressure 23% (last 10s), swap 26% full
// (0.5/2.0 GB) — consider intervening", or "…, no swap — …".
func pressureText(p PressureFigures) string {
	text := "memory pressure " + percent(p.Ratio) + " (last " + windowText(p.Window) + ")"
	if p.SwapKnown {
		text += ", " + swapOrNone(p.Swap)
	}
	return text + considerIntervening
}

// pressureSubject names a pressure push in the run log: "pressure 23%".
func pressureSubject(p PressureFigures) string { return "pressure " + percent(p.Ratio) }

// oomText is `OOM killer struck (1 kill) during "Pretrain 1/3" — swap 56%
// full (1.1/2.0 GB)`; with a victim `OOM killer struck python3 (pid 4242)
// during …`, and "and 2 more" when it was one of several kills.
func oomText(o OOMFigures) string {
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
	return text
}

// oomSubject names an OOM push in the run log: "oom 1 kill".
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
	name = strings.Join(strings.Fields(sanitizeMessage(name)), " ")
	if name == "" {
		return "a process"
	}
	return name
}

func swapOrNone(s SwapFigures) string {
	if s.TotalBytes == 0 {
		return "no swap"
	}
	return swapText(s)
}

func percent(r float64) string {
	if !usableRatio(r) {
		return "?%"
	}
	return strconv.Itoa(int(math.Round(r*100))) + "%"
}

// windowText is "10s", "1m", "90s", "5m".
func windowText(d time.Duration) string {
	switch {
	case d <= 0:
		return "?"
	case d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	default:
		return strconv.Itoa(int(math.Round(d.Seconds()))) + "s"
	}
}

// swapFromBytes reads the swap byte annotations the pressure and OOM
// alerts carry. ok is false when they are missing or do not make sense; a
// total of 0 is a host without swap.
func swapFromBytes(a template.KV) (SwapFigures, bool) {
	used, uok := parseBytes(a[annotationUsed])
	total, tok := parseBytes(a[annotationTotal])
	switch {
	case !uok || !tok:
		return SwapFigures{}, false
	case total == 0:
		return SwapFigures{}, true
	case used > total:
		return SwapFigures{}, false
	}
	return SwapFigures{Ratio: float64(used) / float64(total), UsedBytes: used, TotalBytes: total}, true
}

// pressureFromAnnotations reads MemoryPressureHigh's annotations; ok is
// false without a usable pressure_ratio.
func pressureFromAnnotations(a template.KV) (PressureFigures, bool) {
	r, ok := parseRatio(a[annotationPressure])
	if !ok {
		return PressureFigures{}, false
	}
	p := PressureFigures{Ratio: r, Window: time.Minute}
	if w, ok := parseDecimal(strings.TrimSpace(a[annotationPressureWindow])); ok && w > 0 && w < 1e6 {
		p.Window = time.Duration(w * float64(time.Second))
	}
	p.Swap, p.SwapKnown = swapFromBytes(a)
	return p, true
}

// oomFromAnnotations reads OOMKill's annotations; ok is false without a
// usable oom_kills count.
func oomFromAnnotations(a template.KV) (OOMFigures, bool) {
	n, ok := parseBytes(a[annotationOOMKills])
	if !ok || n == 0 {
		return OOMFigures{}, false
	}
	o := OOMFigures{Kills: n, Phase: strings.TrimSpace(a[annotationActivePhase])}
	o.Swap, o.SwapKnown = swapFromBytes(a)
	return o, true
}
