package barkbridge

import (
	"context"
	"strings"
	"time"

	"lavender/watchdog"
)

// Bridge is the watchdog's Pusher: its alerts go through the webhook's
// formatter, sender and run log.
var _ watchdog.Pusher = (*Bridge)(nil)

// Push sends one push carrying every alert the watchdog raised in one poll
// to every target, and writes one run-log line for it. Several alerts share
// one prefix, their texts joined by "; " in the order of the rules (swap,
// pressure, oom); the run-log subject joins theirs with " + ", e.g.
// "BARK pressure 23% + oom 1 kill sent ok=1 fail=0". A resolution says how
// long its incident lasted: "resolved: swap 31% full (9.9/32.0 GB) after
// 42m". A push left empty answers (0, 0).
//
// The push carries its incident's Bark id (watchdogIncidentID), so that
// reminders and the resolution replace the first notification; a push of
// several alerts is a notification of its own, with an id derived from all
// of theirs. Its group is the host's name. With DeleteOnResolve, a push of
// resolutions only deletes the notification instead.
func (b *Bridge) Push(ctx context.Context, alerts []watchdog.Alert) (ok, failed int) {
	var texts, subjects, ids []string
	var events []stormEvent
	resolvedOnly := true
	for _, a := range alerts {
		text, subj := watchdogText(a)
		if a.Status == watchdog.Resolved {
			text = "resolved: " + strings.TrimSuffix(text, considerIntervening) + after(a.Lasted())
			subj = "resolved " + subj
		} else {
			resolvedOnly = false
		}
		texts = append(texts, text)
		subjects = append(subjects, subj)
		ids = append(ids, watchdogIncidentID(incidentRule(a), a.Began, b.cfg.Hostname))
		events = append(events, stormEvent{Watchdog: a.Rule, Resolved: a.Status == watchdog.Resolved})
	}
	if len(texts) == 0 {
		return 0, 0
	}
	id := ids[0]
	if len(ids) > 1 {
		id = hashID(append([]string{"watchdog-poll"}, ids...)...)
	}
	d := &delivery{
		subject: strings.Join(subjects, " + "),
		push:    push{message: clipMessage(withPrefix(b.cfg.Prefix, strings.Join(texts, "; ")))},
		storm:   events,
	}
	b.addIncident(d, id, b.cfg.Hostname, resolvedOnly)
	b.deliver(ctx, []*delivery{d})
	b.record(d)
	status := "firing"
	if resolvedOnly {
		status = "resolved"
	}
	if d.ok+d.failed+d.held > 0 {
		b.history.event(d.event("watchdog", status, d.action(), b.cfg.Now()))
	}
	// A held push counts as delivered, as the webhook answers a held alert
	// 200: it goes out in the summary, and a retry would only add to it.
	return d.ok + d.held, d.failed
}

// incidentRule names a watchdog incident's rule for its id: a phase rule
// fires once per phase, so the phase is part of it.
func incidentRule(a watchdog.Alert) string {
	switch a.Rule {
	case watchdog.PhaseRuleFailed, watchdog.PhaseRuleStalled, watchdog.PhaseRuleDone:
		return a.Rule + "\x00" + a.Phase
	}
	return a.Rule
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
