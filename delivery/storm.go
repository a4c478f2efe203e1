package delivery

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/runlog"
)

// Storm control defaults.
const (
	// DefaultMaxPerMinute is --bark.max-per-minute's default: pushes one
	// target (one phone) gets in any 60 s.
	DefaultMaxPerMinute = 10
	// MaxMaxPerMinute bounds the setting, and so the memory of a target's
	// window; no phone is helped by more than this.
	MaxMaxPerMinute = 1000
	// stormWindow is the sliding window the limit applies to.
	stormWindow = time.Minute
	// stormMaxTargets bounds the targets tracked at once; targets come
	// from *.bark.env files, so this is a safety net, never a limit met.
	stormMaxTargets = 1024
	// stormMaxNames bounds the distinct alert names a summary counts; the
	// rest are counted together as "other alerts".
	stormMaxNames = 32
	// stormMaxNameBytes bounds one alert name in a summary.
	stormMaxNameBytes = 64
)

// HeldPushesMetric counts the pushes storm control held back.
const HeldPushesMetric = "lavender_bark_pushes_held_total"

// stormLimiter allows at most max pushes per target in any window (60 s).
//
// The window, precisely: a push at time t occupies one of the target's max
// slots during [t, t+60s). A push is allowed when a slot is free and no
// alert is held; otherwise it is held. Held alerts go out as one summary
// push as soon as a slot frees, that is when the oldest push in the window
// turns 60 s old; the summary takes that slot, like any push. So a target
// never gets more than max pushes (summaries included) in any 60 s, alerts
// are held for at most 60 s, and later alerts never overtake held ones.
//
// Every push to a target should ask Allow, firing, resolved and watchdog
// pushes alike; a push it refuses is held and must not be sent. Due (or
// run, which calls it on a ticker) hands out the summaries to send. Clock
// readings are passed in, so tests need no sleeping.
type stormLimiter struct {
	max    int // 0: storm control is off
	window time.Duration
	prefix string

	held *prometheus.CounterVec // target

	mu      sync.Mutex
	targets map[string]*stormState
	known   map[string]bool // the targets configured now (trackTargets)
	// loads counts trackTargets' calls; moved maps each key before the last
	// one to its target's key after it ("": gone), for a summary taken
	// before it (requeue).
	loads int
	moved map[string]string

	// holding tells run that alerts are held (Allow, requeue, restore), so
	// that run ticks only while some are: an idle serve stays asleep.
	holding chan struct{}
}

// stormState is one target's window and its held alerts.
type stormState struct {
	sent      []time.Time        // pushes in the window, oldest first; len <= max
	held      map[StormEvent]int // held alerts by kind, at most stormMaxNames kinds
	others    int                // held alerts whose kind did not fit in held
	heldTotal int
	restored  int // of heldTotal, the alerts held before a restart (the state file's)
}

// StormEvent is one alert a held push stood for: an Alertmanager alert by
// its name, or one watchdog alert by its rule's words. A watchdog push that
// joins 31 stalled phases is 31 events, so a summary counts what happened,
// not how many pushes it was said in.
type StormEvent struct {
	Alert string `json:"alert,omitempty"` // the alertname, cleaned by summaryName; "" with Words
	// Words name the event in a summary as they stand ("phase stalled"):
	// the producer's own words, never a name from outside.
	Words    string `json:"words,omitempty"`
	Resolved bool   `json:"resolved,omitempty"`
	// Watchdog is what lavender 0.3's state file kept instead of Words (a
	// rule's name); read, never written.
	Watchdog string `json:"watchdog,omitempty"`
}

// AlertEvent is the storm event of an alert named name (from outside: it
// is cleaned, and quoted in a summary where it could fake its structure).
func AlertEvent(name string, resolved bool) StormEvent {
	return StormEvent{Alert: summaryName(name), Resolved: resolved}
}

// WordedEvent is the storm event of a push of the producer's own words.
func WordedEvent(words string, resolved bool) StormEvent {
	return StormEvent{Words: summaryName(words), Resolved: resolved}
}

// label is how a summary lists the event: "SwapUsageHigh", "phase
// stalled", "\"Disk full\" resolved".
func (e StormEvent) label() string {
	var s string
	switch {
	case e.Words != "":
		s = e.Words
	case e.Watchdog != "":
		s = "watchdog " + alertLabel(e.Watchdog)
	case e.Alert == "":
		s = "unnamed alert"
	default:
		s = alertLabel(e.Alert)
	}
	if e.Resolved {
		s += " resolved"
	}
	return s
}

// alertLabel shows an alert name in a summary so that no name can fake the
// summary's structure (", " between items, " ×N" after each): a name of
// letters, digits and _ : . - (what alert names are in practice) stands as
// it is; any other, a cut one included, goes in double quotes with its own
// quotes turned into ' and its × signs into x. So every quote, ", " outside
// quotes and × in a summary is the summary's own.
func alertLabel(name string) string {
	bare := name != ""
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_:.-", r) {
			bare = false
			break
		}
	}
	if bare {
		return name
	}
	return `"` + quotedNameReplacer.Replace(name) + `"`
}

var quotedNameReplacer = strings.NewReplacer(`"`, "'", "×", "x")

// stormSummary is one summary push, to be sent to Target.
type stormSummary struct {
	Target string      // the name given to Allow, e.g. "phone.bark.env:3"
	Text   string      // "[lavender-2] 37 more alerts in the last minute: SwapUsageHigh ×30, PhaseStalled ×7"
	Held   int         // alerts the summary stands for
	Counts []nameCount // by count, then label; the text may fold the tail into "other alerts"
	Others int         // held alerts beyond stormMaxNames distinct kinds

	// What the summary took from the target's state, so that one that
	// failed can be held again (requeue).
	held     map[StormEvent]int
	restored int
	loads    int // the limiter's loads when it was taken
}

// nameCount is how many held alerts a summary lists under one label.
type nameCount struct {
	Name  string
	Count int
}

// Subject names the summary in the run log: "BARK 37 more alerts sent ok=1 fail=0".
func (s stormSummary) Subject() string { return moreAlerts(s.Held) }

// newStormLimiter makes a limiter of maxPerMinute pushes per target in any
// 60 s; 0 turns storm control off. prefix starts the summary text.
func newStormLimiter(maxPerMinute int, prefix string) (*stormLimiter, error) {
	if maxPerMinute < 0 || maxPerMinute > MaxMaxPerMinute {
		return nil, fmt.Errorf("delivery: max pushes per minute %d is not in [0, %d] (0 turns storm control off)", maxPerMinute, MaxMaxPerMinute)
	}
	return &stormLimiter{
		max:    maxPerMinute,
		window: stormWindow,
		prefix: prefix,
		held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: HeldPushesMetric,
			Help: "Pushes held back by storm control (--bark.max-per-minute), by target (file:line); they go out together in one summary push.",
		}, []string{"target"}),
		targets: make(map[string]*stormState),
		holding: make(chan struct{}, 1),
	}, nil
}

// Collector is the held-pushes counter, for the caller to register.
func (l *stormLimiter) Collector() prometheus.Collector { return l.held }

// trackTargets starts the counter of every key of now at zero, and moves
// the window and held alerts of each key of before to the key its target
// has now (stormKeys.follow): a reload that renumbers a line must not drop
// what its target holds. Those of targets a reload removed are forgotten,
// with their counters: there is no longer anywhere to send their summary.
// It returns how many held alerts went so.
func (l *stormLimiter) trackTargets(before, now stormKeys) (dropped int) {
	keep := make(map[string]bool, len(now.order))
	for _, n := range now.order {
		keep[n] = true
		l.held.WithLabelValues(n)
	}
	// Every key of before, not only those holding alerts now: a summary on
	// the wire during the reload took its alerts, and if it fails they go
	// back (requeue) to where its target is now.
	moved := make(map[string]string, len(before.order))
	for _, key := range before.order {
		moved[key] = now.follow(key, before.ids[key], before.configured)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.known, l.moved = keep, moved
	l.loads++
	targets := make(map[string]*stormState, len(l.targets))
	for key, st := range l.targets {
		to, ok := moved[key]
		if !ok && keep[key] {
			to = key // held by a Send that began before the last load: kept while the key is in use
		}
		if !ok && !keep[key] {
			l.held.DeleteLabelValues(key) // a key before does not name; those it does go below
		}
		switch into := targets[to]; {
		case to == "":
			dropped += st.heldTotal
		case into != nil:
			into.merge(st, l.max)
		default:
			targets[to] = st
		}
	}
	l.targets = targets
	for _, key := range before.order {
		if !keep[key] {
			l.held.DeleteLabelValues(key)
		}
	}
	return dropped
}

// merge adds o's window and held alerts to st's, keeping the newest max
// pushes of the two windows: two keys that became one (two targets now
// named as one phone) share one budget.
func (st *stormState) merge(o *stormState, max int) {
	st.sent = append(st.sent, o.sent...)
	slices.SortFunc(st.sent, func(a, b time.Time) int { return a.Compare(b) })
	if max > 0 && len(st.sent) > max {
		st.sent = st.sent[len(st.sent)-max:]
	}
	st.holdAll(o.held, o.others, o.restored)
}

// holdAll holds again what another state or a summary held: its alerts by
// event, those past the summary's names (others), and how many of them a
// restart restored.
func (st *stormState) holdAll(held map[StormEvent]int, others, restored int) {
	for e, n := range held {
		st.holdN(e, n)
	}
	st.heldTotal += others
	st.others += others
	st.restored += restored
}

// Allow reports whether a push of events (the alerts it says) may go to
// target now. When it may not, its events are held for the target's next
// summary, and the push is counted as held.
func (l *stormLimiter) Allow(target string, events []StormEvent, now time.Time) bool {
	if l == nil || l.max == 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.targets[target]
	if st == nil {
		if len(l.targets) >= stormMaxTargets {
			l.dropIdle(now)
		}
		if len(l.targets) >= stormMaxTargets {
			return true // cannot track it: better a push too many than one lost
		}
		st = &stormState{}
		l.targets[target] = st
	}
	st.prune(now, l.window)
	if st.heldTotal == 0 && len(st.sent) < l.max {
		st.sent = append(st.sent, now)
		return true
	}
	for _, e := range events {
		st.hold(e)
	}
	l.held.WithLabelValues(target).Inc()
	l.wakeRun()
	return false
}

// wakeRun tells run that alerts are held, without waiting: one signal
// pending is enough.
func (l *stormLimiter) wakeRun() {
	select {
	case l.holding <- struct{}{}:
	default:
	}
}

// holdsAlerts reports whether any target holds alerts.
func (l *stormLimiter) holdsAlerts() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range l.targets {
		if st.heldTotal > 0 {
			return true
		}
	}
	return false
}

// Due returns the summaries ready at now, one per target at most, sorted
// by target, and counts each as a push in its target's window. Each held
// alert is in exactly one summary.
func (l *stormLimiter) Due(now time.Time) []stormSummary { return l.summaries(now, false) }

// summaries takes a summary from every target that holds alerts and, unless
// atStop, has room in its window, sorted by target. Outside a stop it then
// forgets the targets left with nothing to track.
func (l *stormLimiter) summaries(now time.Time, atStop bool) []stormSummary {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []stormSummary
	for target, st := range l.targets {
		if st.heldTotal == 0 {
			continue
		}
		st.prune(now, l.window)
		if !atStop && l.max > 0 && len(st.sent) >= l.max {
			continue // with storm control off, only alerts held before a restart are here: due at once
		}
		s := st.take(target, l.prefix, now)
		s.loads = l.loads
		out = append(out, s)
	}
	if !atStop {
		l.dropIdle(now)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// run calls Due every tick while alerts are held, until ctx ends, and
// sends what it returns. With nothing held it waits without a timer, so
// that storm control costs an idle process no wakeups. send is called
// from run's goroutine only, one summary at a time.
func (l *stormLimiter) run(ctx context.Context, tick time.Duration, now func() time.Time, send func(stormSummary)) {
	if l == nil || l.max == 0 {
		return
	}
	t := time.NewTimer(tick)
	t.Stop()
	defer t.Stop()
	armed := false
	for {
		// Armed once, not at every signal: alerts held many times a
		// second must not keep pushing the tick away.
		if !armed && l.holdsAlerts() {
			t.Reset(tick)
			armed = true
		}
		var due <-chan time.Time
		if armed {
			due = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-l.holding:
		case <-due:
			armed = false
			for _, s := range l.Due(now()) {
				send(s)
			}
		}
	}
}

// dropIdle forgets targets with nothing in their window and nothing held,
// so memory follows the targets that are busy now. Caller holds mu.
func (l *stormLimiter) dropIdle(now time.Time) {
	for target, st := range l.targets {
		st.prune(now, l.window)
		if len(st.sent) == 0 && st.heldTotal == 0 {
			delete(l.targets, target)
		}
	}
}

// prune drops the pushes that left the window: a push at t counts during
// [t, t+window).
func (st *stormState) prune(now time.Time, window time.Duration) {
	i := 0
	for i < len(st.sent) && !now.Before(st.sent[i].Add(window)) {
		i++
	}
	if i > 0 {
		st.sent = append(st.sent[:0], st.sent[i:]...)
	}
}

func (st *stormState) hold(e StormEvent) { st.holdN(e, 1) }

// take hands out the target's summary and counts it as a push at now.
func (st *stormState) take(target, prefix string, now time.Time) stormSummary {
	s := st.summary(target, prefix)
	st.sent = append(st.sent, now)
	st.held, st.others, st.heldTotal, st.restored = nil, 0, 0, 0
	return s
}

// summary builds the target's summary push. The text lists the events by
// count, most first, then by label, and folds whatever does not fit the
// message size into "other alerts ×N", so the counts always add up to the
// total.
func (st *stormState) summary(target, prefix string) stormSummary {
	s := stormSummary{Target: target, Held: st.heldTotal, Others: st.others, held: st.held, restored: st.restored}
	byLabel := make(map[string]int, len(st.held))
	for e, n := range st.held {
		byLabel[e.label()] += n
	}
	for label, n := range byLabel {
		s.Counts = append(s.Counts, nameCount{label, n})
	}
	sort.Slice(s.Counts, func(i, j int) bool {
		a, b := s.Counts[i], s.Counts[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Name < b.Name
	})
	head := moreAlerts(st.heldTotal) + " in the last minute: "
	switch {
	case st.restored >= st.heldTotal:
		head = moreAlerts(st.heldTotal) + " held across a restart: "
	case st.restored > 0:
		head = moreAlerts(st.heldTotal) + ", some held across a restart: "
	}
	if prefix != "" {
		head = prefix + " " + head
	}
	var b strings.Builder
	b.WriteString(head)
	folded := st.others
	for i, c := range s.Counts {
		item := c.Name + " ×" + strconv.Itoa(c.Count)
		// Leave room for ", other alerts ×<up to 10 digits>" after this item.
		if b.Len()+len(", ")+len(item)+len(otherAlerts)+10 > MaxTextBytes {
			for _, rest := range s.Counts[i:] {
				folded += rest.Count
			}
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(item)
	}
	if folded > 0 {
		if b.Len() > len(head) {
			b.WriteString(", ")
		}
		b.WriteString(otherAlerts + strconv.Itoa(folded))
	}
	s.Text = runlog.Truncate(b.String(), MaxTextBytes) // only a huge prefix needs it
	return s
}

// otherAlerts counts the alerts a summary does not list one by one; a
// bare alert name has no space, so none can pass for it.
const otherAlerts = "other alerts ×"

func moreAlerts(n int) string {
	if n == 1 {
		return "1 more alert"
	}
	return strconv.Itoa(n) + " more alerts"
}

// summaryName makes an alert name fit a summary: one line, valid UTF-8,
// no format characters (a right-to-left override would turn the text
// around), bounded, cut with "…"; "" for a name of nothing printable.
func summaryName(name string) string {
	name = textsafe.StripHidden(strings.ToValidUTF8(name, "\uFFFD"))
	name = strings.Join(strings.FieldsFunc(name, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	return runlog.Truncate(name, stormMaxNameBytes)
}
