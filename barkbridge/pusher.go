package barkbridge

import (
	"context"

	"lavender/bark"
	"lavender/pushtext"
	"lavender/watchdog"
)

// Bridge is the watchdog's Pusher: its alerts go through the webhook's
// formatter, sender and run log.
var _ watchdog.Pusher = (*Bridge)(nil)

// Push sends one push carrying every alert the watchdog raised in one poll
// to every target, and writes one run-log line for it: the alerts' texts
// joined into one (pushtext.Join) under one prefix. A push left empty
// answers (0, 0).
//
// The push carries its incident's Bark id (watchdogIncidentID), so that
// reminders and the resolution replace the first notification; a push of
// several alerts is a notification of its own, with an id derived from all
// of theirs. Its group is the host's name. With DeleteOnResolve, a push of
// resolutions only deletes the notification instead.
func (b *Bridge) Push(ctx context.Context, alerts []watchdog.Alert) (ok, failed int) {
	var texts []pushtext.Text
	var ids []string
	var events []stormEvent
	resolvedOnly := true
	for _, a := range alerts {
		texts = append(texts, pushtext.Alert(a))
		if a.Status != watchdog.Resolved {
			resolvedOnly = false
		}
		ids = append(ids, watchdogIncidentID(incidentRule(a), a.Began, b.cfg.Hostname))
		events = append(events, stormEvent{Watchdog: string(a.Rule), Resolved: a.Status == watchdog.Resolved})
	}
	if len(texts) == 0 {
		return 0, 0
	}
	id := ids[0]
	if len(ids) > 1 {
		id = hashID(append([]string{"watchdog-poll"}, ids...)...)
	}
	// The joined text fits the push after the prefix, and the subject the
	// run log's line, so neither is cut mid-list.
	room := bark.MaxMessageBytes - len(pushtext.WithPrefix(b.cfg.Prefix, ""))
	d := b.textDelivery(pushtext.Join(texts, room, maxSubjectBytes))
	d.storm = events
	if level := b.cfg.Levels.of(alerts); level != bark.LevelPassive {
		d.Level = level
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

// incidentRule names a watchdog incident's rule for its id, with the
// incident the watchdog tells apart within it (a phase, a filesystem and
// condition), so that each has a notification of its own.
func incidentRule(a watchdog.Alert) string {
	if a.Incident == "" {
		return string(a.Rule)
	}
	return string(a.Rule) + "\x00" + a.Incident
}
