package barkbridge

import (
	"context"
	"strings"
	"time"

	"lavender/watchdog"
)

// pushResolved says whether the watchdog's resolutions are pushed. Not yet:
// a resolution push needs the incident's id so that it can replace the
// firing push on the phone (issue 18).
const pushResolved = false

// Bridge is the watchdog's Pusher: its alerts go through the webhook's
// formatter, sender and run log.
var _ watchdog.Pusher = (*Bridge)(nil)

// Push sends one push carrying every alert the watchdog raised in one poll
// to every target, and writes one run-log line for it. Several alerts share
// one prefix, their texts joined by "; " in the order of the rules (swap,
// pressure, oom); the run-log subject joins theirs with " + ", e.g.
// "BARK pressure 23% + oom 1 kill sent ok=1 fail=0". Alerts it does not
// push (resolutions) are left out; a push left empty answers (0, 0).
func (b *Bridge) Push(ctx context.Context, alerts []watchdog.Alert) (ok, failed int) {
	var texts, subjects []string
	for _, a := range alerts {
		if a.Status == watchdog.Resolved && !pushResolved {
			continue
		}
		text, subj := watchdogText(a)
		texts = append(texts, text)
		subjects = append(subjects, subj)
	}
	if len(texts) == 0 {
		return 0, 0
	}
	d := &delivery{
		subject: strings.Join(subjects, " + "),
		message: clipMessage(withPrefix(b.cfg.Prefix, strings.Join(texts, "; "))),
	}
	b.deliver(ctx, []*delivery{d})
	b.record(d)
	if d.ok+d.failed > 0 {
		b.history.event(d.event("watchdog", "firing", d.action(), b.cfg.Now()))
	}
	return d.ok, d.failed
}

// watchdogText is the text and run-log subject of one watchdog alert,
// without the prefix. A rule it has no text for still reaches the phone,
// by name.
func watchdogText(a watchdog.Alert) (text, subj string) {
	swap := swapFigures(a.Sample.Swap)
	switch a.Rule {
	case "swap":
		return swapText(swap) + considerIntervening, swapSubject(swap)
	case "pressure":
		p := PressureFigures{Ratio: a.Sample.Pressure.Some, Window: 10 * time.Second, Swap: swap, SwapKnown: true}
		return pressureText(p), pressureSubject(p)
	case "oom":
		o := OOMFigures{Kills: a.Kills, Phase: a.Phase, Swap: swap, SwapKnown: true}
		if a.Victim.Known() {
			o.VictimName, o.VictimPID = a.Victim.Name, a.Victim.PID
		}
		return oomText(o), oomSubject(o)
	case watchdog.PhaseRuleFailed, watchdog.PhaseRuleStalled, watchdog.PhaseRuleDone:
		return watchdogPhaseText(a)
	}
	return a.Rule + " " + string(a.Status), a.Rule
}

func swapFigures(s watchdog.Swap) SwapFigures {
	return SwapFigures{Ratio: s.Ratio, UsedBytes: s.UsedBytes, TotalBytes: s.TotalBytes}
}
