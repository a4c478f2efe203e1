// Package watchpush hands the watchdog's alerts to delivery: it words them
// with pushtext, gives each poll's push its incident's id and level, and
// says what storm control counts it as. It is the watchdog's Pusher.
package watchpush

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/notify"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/watchdog"
)

// Config configures a Pusher.
type Config struct {
	Prefix string // starts every message; default pushtext.DefaultPrefix
	// Hostname is the watchdog's host: its pushes' group and part of their
	// ids. The commands pass os.Hostname; "" leaves the group out.
	Hostname string
	// Levels sets the level of the watchdog's pushes by kind
	// (--bark.level); nil: all passive. A Bark template's own level wins.
	Levels Levels
}

// Pusher is the watchdog's Pusher over a delivery pipeline.
type Pusher struct {
	cfg      Config
	delivery *delivery.Pipeline
	shown    shown // which notification shows which incidents
}

var _ watchdog.Pusher = (*Pusher)(nil)

// New returns the Pusher that hands the watchdog's pushes to d.
func New(cfg Config, d *delivery.Pipeline) *Pusher {
	if cfg.Prefix == "" {
		cfg.Prefix = pushtext.DefaultPrefix
	}
	return &Pusher{cfg: cfg, delivery: d}
}

// Push sends one push carrying every alert the watchdog raised in one poll
// to every target, and writes one run-log line for it: the alerts' texts
// joined into one (pushtext.Join) under one prefix. A push left empty
// answers (0, 0).
//
// The push carries its incident's id (IncidentID), so that reminders and
// the resolution replace the first notification; a push of several alerts
// is a notification of its own, with an id derived from all of theirs,
// and their resolutions replace it: all of them when they end in one
// poll, or the last of them to end, the earlier ones having each a
// notification of their own. Its group is the host's name. With
// DeleteOnResolve, a push of resolutions only deletes the notification
// instead.
func (p *Pusher) Push(ctx context.Context, alerts []watchdog.Alert) (ok, failed int) {
	if len(alerts) == 0 {
		return 0, 0
	}
	ids := make([]string, len(alerts))
	resolvedOnly := true
	for i, a := range alerts {
		ids[i] = IncidentID(incidentRule(a), a.Began, p.cfg.Hostname)
		resolvedOnly = resolvedOnly && a.Status == watchdog.Resolved
	}
	if !resolvedOnly {
		return outcome(p.push(ctx, alerts, ids, ""))
	}
	// Resolutions replace the notifications that showed their incidents,
	// one push for each notification whose every incident still shown
	// ends now; the rest (shown elsewhere too, or never shown) go together
	// as before.
	// Each push goes out whatever became of the others, and the counts are
	// their sums: the watchdog never retries a resolution, so a push left
	// out after another failed would leave its notification showing its
	// incidents for ever. A notification is forgotten only once a target
	// took its resolution: until then, the same resolutions sent again
	// find it and replace it, rather than go out under an id of their own.
	// An incident that ends apart leaves its notification whatever became
	// of its push, so that the last of the others to end replaces it.
	for _, g := range p.shown.split(ids) {
		var part []watchdog.Alert
		var partIDs []string
		for _, i := range g.members {
			part, partIDs = append(part, alerts[i]), append(partIDs, ids[i])
		}
		d := p.push(ctx, part, partIDs, g.notification)
		switch {
		case g.notification == "":
			p.shown.ended(partIDs)
		case reached(d):
			p.shown.forget(g.notification)
		}
		o, f := outcome(d)
		ok, failed = ok+o, failed+f
	}
	return ok, failed
}

// push sends one push of alerts, whose incidents are ids, under the
// notification id notification ("": its own, from the incidents).
func (p *Pusher) push(ctx context.Context, alerts []watchdog.Alert, ids []string, notification string) *delivery.Push {
	var texts []pushtext.Text
	var events []delivery.StormEvent
	resolvedOnly := true
	for _, a := range alerts {
		texts = append(texts, pushtext.Alert(a))
		if a.Status != watchdog.Resolved {
			resolvedOnly = false
		}
		events = append(events, stormEvent(a))
	}
	id := notification
	switch {
	case id != "":
	case len(ids) == 1:
		id = ids[0]
	default:
		id = delivery.IncidentID(append([]string{"watchdog-poll"}, ids...)...)
	}
	if !resolvedOnly {
		p.shown.record(id, ids)
	}
	// The joined text fits the push after the prefix, and the subject the
	// run log's line, so neither is cut mid-list.
	room := delivery.MaxTextBytes - len(pushtext.WithPrefix(p.cfg.Prefix, ""))
	t := pushtext.Join(texts, room, delivery.MaxSubjectBytes)
	d := delivery.NewPush(t.Subject, pushtext.WithPrefix(p.cfg.Prefix, t.Body))
	d.Storm = events
	d.Tags = tags(alerts)
	if level := p.cfg.Levels.of(alerts); level != notify.LevelPassive {
		d.Level = level
	}
	p.delivery.Incident(d, id, p.cfg.Hostname, resolvedOnly)
	p.delivery.Send(ctx, []*delivery.Push{d})
	p.delivery.Record(d)
	status := "firing"
	if resolvedOnly {
		status = "resolved"
	}
	if d.OK+d.Failed+d.Held > 0 {
		p.delivery.AddEvent(d.Event("watchdog", status, d.Action(), p.delivery.Now()))
	}
	return d
}

// outcome is what Push answers for d: the targets that took it and those
// that failed. A held push counts as delivered, as the webhook answers a
// held alert 200: it goes out in the summary, and a retry would only add
// to it.
func outcome(d *delivery.Push) (ok, failed int) { return d.OK + d.Held, d.Failed }

// reached reports whether a target took d (or held it, or had it
// already), or none failed it: only a push that every target it was tried
// on failed leaves its notification to be replaced still.
func reached(d *delivery.Push) bool {
	return d.OK+d.Held+d.Duplicate > 0 || d.Failed+d.Joined == 0
}

// tags are a poll's push's tags: each alert's, once, in the alerts'
// order (the first alert's emoji shows before the title).
func tags(alerts []watchdog.Alert) []string {
	var out []string
	for _, a := range alerts {
		for _, t := range pushtext.Tags(a.Rule, a.Status == watchdog.Resolved) {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// stormEvent is what storm control counts a watchdog alert as: its rule's
// words in a summary ("phase stalled"), or, for a rule without them, its
// name.
func stormEvent(a watchdog.Alert) delivery.StormEvent {
	resolved := a.Status == watchdog.Resolved
	if words, ok := pushtext.SummaryName(a.Rule); ok {
		return delivery.WordedEvent(words, resolved)
	}
	return delivery.WordedEvent("watchdog "+string(a.Rule), resolved)
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

// IncidentID is the id of a watchdog incident: one rule on one host, from
// the time the rule began to fire until it re-arms. began must be the time
// stored when the incident began, not the time of the current poll. The
// host keeps two hosts' watchdogs apart on one phone.
func IncidentID(rule string, began time.Time, host string) string {
	return delivery.IncidentID("watchdog", rule, host, strconv.FormatInt(began.UnixNano(), 10))
}
