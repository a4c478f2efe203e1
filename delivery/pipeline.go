// Package delivery is the one pipeline every push goes through, whatever
// made it (a watchdog rule, an Alertmanager alert, `bark send`): dedup and
// incidents, storm control per phone, fan-out to every target of every
// channel (Bark, ntfy) behind notify.Notifier, and the record of each push
// (the run log's BARK line, the status page's history, the state file).
// It knows neither Alertmanager nor the watchdog: their packages (webhook,
// watchpush) word their pushes with pushtext and hand them here.
package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/internal/throttle"
	"github.com/lavender-ml/lavender/notify"
	"github.com/lavender-ml/lavender/ntfy"
	"github.com/lavender-ml/lavender/runlog"
)

// Defaults for the zero values of Config.
const (
	DefaultConfigDir   = "."
	DefaultTimeout     = 5 * time.Second
	DefaultDedupWindow = time.Hour
	// DefaultMaxParallel bounds the pushes one Send has in flight: a
	// webhook group of hundreds of alerts must not open hundreds of
	// connections to Bark at once.
	DefaultMaxParallel = 8
)

// Config configures a Bridge. Zero values take the defaults above.
type Config struct {
	ConfigDir string        // where the *.bark.env files are; default "."
	Timeout   time.Duration // per push, its retries included, and the bound on a webhook's answer
	// Retry is the retry stage's backoff within Timeout; zero: DefaultRetry.
	Retry       Retry
	Prefix      string        // starts every summary ("[lavender-2]"); the producers prefix their own texts
	DedupWindow time.Duration // how long an accepted push is remembered
	// DedupMaxEntries caps the dedup memory; default DefaultDedupMaxEntries.
	DedupMaxEntries int
	MaxParallel     int // pushes in flight per Send
	// MaxPerMinute is the storm limit: pushes per target in any 60 s, the
	// rest held for one summary push; 0 turns it off. Default: none (0);
	// the commands pass DefaultMaxPerMinute.
	MaxPerMinute int
	// DeleteOnResolve removes an incident's notification (delete=1 with its
	// id) when it resolves, instead of replacing it with the resolved text.
	DeleteOnResolve bool
	// ExternalURL is where users reach lavender (--web.external-url): a
	// tapped notification opens it. Empty: pushes carry no url.
	ExternalURL string
	// StateFile is where the held alerts and the dedup memory are kept
	// across a restart or a crash (the serving commands pass
	// StateFileName in the logs dir); "": nothing is kept.
	StateFile string

	// Runlog locates the run logs; BARK lines go to whichever run is
	// current when they are written (runlog.AppendCurrent).
	Runlog runlog.Options
	// WriteErrors counts BARK lines the run log refused. cmd/lavender
	// passes the bridge's series of lavender_runlog_write_errors_total;
	// default a counter nobody exports.
	WriteErrors prometheus.Counter

	// HTTPClient sends the pushes (bark.New makes it refuse redirects);
	// tests inject one. Default: a client that honours the proxy
	// environment, with deadlines from Timeout.
	HTTPClient *http.Client
	// Now is the clock of the dedup window and of the texts that say how
	// long an alert has fired; default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.ConfigDir == "" {
		c.ConfigDir = DefaultConfigDir
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	c.Retry = c.Retry.withDefaults()
	if c.DedupWindow == 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.DedupMaxEntries <= 0 {
		c.DedupMaxEntries = DefaultDedupMaxEntries
	}
	if c.MaxParallel <= 0 {
		c.MaxParallel = DefaultMaxParallel
	}
	if c.WriteErrors == nil {
		c.WriteErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "unexported_write_errors_total"})
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, c.Check()
}

// Pipeline sends pushes to the targets of every channel. It is safe for
// concurrent use.
type Pipeline struct {
	cfg       Config
	logger    *slog.Logger
	metrics   *metrics
	dedup     *dedup
	logErrors throttle.Reporter
	history   *pushHistory // what the status page shows
	storm     *stormLimiter

	state       bridgeState   // the state file
	changes     atomic.Uint64 // changes of what the state file keeps
	stateErrors throttle.Reporter

	// loadMu serialises loads, so that a SIGHUP and a POST /-/reload at
	// once cannot leave the older load's targets and series in place.
	loadMu sync.Mutex
	// afterRead, when a test sets it, runs between reading the files and
	// storing what was read: where an unserialised load could be overtaken.
	afterRead func()
	mu        sync.RWMutex
	notifiers []notify.Notifier
}

// New loads the targets and registers the metrics with reg (nil: none). An
// unreadable config dir is an error. Bad target lines are not: they are
// logged as file:line: reason, the good targets load, and
// lavender_bark_config_last_reload_successful is 0, so that one typo does
// not take down the metrics and the watchdog with it. No target at all is
// a loud warning, so that a bridge can start before its first phone is
// configured. `bark check` still fails on the same files.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Pipeline, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	storm, err := newStormLimiter(cfg.MaxPerMinute, cfg.Prefix)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(reg, storm.Collector())
	if err != nil {
		return nil, fmt.Errorf("delivery: register metrics: %w", err)
	}
	b := &Pipeline{
		cfg:     cfg,
		logger:  logger,
		metrics: m,
		dedup:   newDedup(cfg.DedupWindow, cfg.DedupMaxEntries),
		history: newPushHistory(),
		storm:   storm,
	}
	if err := b.load(true); err != nil {
		return nil, err
	}
	b.state.path = cfg.StateFile
	b.state.every, b.state.retryMax = stateSaveInterval, stateRetryMax
	b.restoreState()
	return b, nil
}

// Reload re-reads the *.bark.env files. On error the targets in use are
// kept, as Prometheus keeps its config after a bad reload.
func (b *Pipeline) Reload() error { return b.load(false) }

// load reads the targets. At start (initial) there are no targets in use
// to keep, so bad lines only leave the good targets and a logged error.
func (b *Pipeline) load(initial bool) error {
	b.loadMu.Lock()
	defer b.loadMu.Unlock()
	res, err := LoadTargets(b.cfg.ConfigDir, b.cfg.HTTPClient)
	if b.afterRead != nil {
		b.afterRead()
	}
	for _, w := range res.Warnings {
		b.logger.Warn("[bark] target files", "warning", w)
	}
	if err != nil {
		b.metrics.reloadOK.Set(0)
		var dirErr *bark.ConfigDirError
		if !initial || errors.As(err, &dirErr) {
			return fmt.Errorf("delivery: load targets: %w", err)
		}
		b.logger.Error("[push] bad lines in the target files; using the good targets until they are fixed and reloaded",
			"err", err, "good_targets", len(res.Notifiers))
	}
	notifiers := res.Notifiers
	old := b.current()
	b.mu.Lock()
	b.notifiers = notifiers
	b.mu.Unlock()
	b.metrics.trackTargets(names(old), names(notifiers))
	if dropped := b.storm.trackTargets(keysOf(old), keysOf(notifiers)); dropped > 0 {
		b.logger.Warn("[bark] a reload removed targets that held alerts; their summary is dropped", "alerts", dropped)
		b.changed()
	}
	b.history.keepOnly(names(notifiers))
	if err == nil {
		b.metrics.reloadOK.Set(1)
		b.metrics.reloadTime.Set(float64(time.Now().UnixNano()) / 1e9)
	}
	if len(notifiers) == 0 {
		b.logger.Warn("[bark] NO TARGETS: nothing will be pushed; add a *"+bark.ConfigSuffix+" or *"+ntfy.ConfigSuffix+" file and reload",
			"dir", b.cfg.ConfigDir)
	} else {
		b.logger.Info("[bark] loaded targets", "targets", len(notifiers), "files", res.Files)
	}
	return nil
}

// names are the notifiers' file:line names.
func names(ns []notify.Notifier) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name()
	}
	return out
}

// Targets names the targets in use, file:line, in load order.
func (b *Pipeline) Targets() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return names(b.notifiers)
}

// current returns the notifiers of the targets in use.
func (b *Pipeline) current() []notify.Notifier {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.notifiers
}

// Push is one message to push to every target, how the pipeline treats
// it, and, once Send returns, its outcome.
type Push struct {
	notify.Message        // the text and the parameters, the same for every target
	Subject        string // names the push in the run log, e.g. "swap 54%"
	// Key makes the push a duplicate at a target that accepted a push with
	// the same key within the dedup window (an Alertmanager retry, an HA
	// peer's copy); nil: never a duplicate.
	Key *Key
	// Storm is what storm control counts the push as; nil: not limited.
	Storm []StormEvent
	// Phone limits the push to the targets of one phone (a storm
	// summary's); "": to all.
	Phone string

	Outcome
}

// Outcome is what became of a push at the targets.
type Outcome struct {
	Results   []Result // the targets pushed to, or that failed, in target order
	OK        int      // pushes made by this call that a service accepted
	Failed    int      // pushes made by this call that failed
	Joined    int      // targets whose push by a concurrent call, waited on, failed
	Duplicate int      // targets that had accepted already, or just did for a concurrent call
	Held      int      // targets storm control held it back from
}

// NewPush is a push of text under subject, clipped as every channel takes
// it, so that what the history shows is what was sent.
func NewPush(subject, text string) *Push {
	return &Push{Subject: subject, Message: notify.Message{Text: Clip(text)}}
}

// AddEvent adds e to the history the status page lists.
func (b *Pipeline) AddEvent(e Event) { b.history.event(e) }

// Now is the pipeline's clock.
func (b *Pipeline) Now() time.Time { return b.cfg.Now() }

// Clip makes text safe and cuts it to MaxTextBytes with "…".
func Clip(text string) string { return bark.Clip(text) }

// MaxTextBytes is the longest text a push carries: the smallest limit of
// the channels.
const MaxTextBytes = bark.MaxMessageBytes

// Incident gives p the parameters of its incident: the id that makes a
// reminder or the resolution replace the earlier notification (or, with
// DeleteOnResolve, delete it), the group of the host it is about, and the
// status page to open.
func (b *Pipeline) Incident(p *Push, id, group string, resolved bool) {
	p.ID, p.Group, p.URL = id, group, b.cfg.ExternalURL // "": no url
	p.Resolved = resolved
	p.Delete = resolved && b.cfg.DeleteOnResolve
}

// Action is what became of the push, for the webhook's answer and
// lavender_webhook_alerts_total: pushed when a target accepted it, failed
// when none did and a push (this call's or a concurrent one's it waited
// on) failed or there was no target, held when storm control kept it for
// the summary, duplicate when every target had accepted already.
func (d *Push) Action() string {
	switch {
	case d.OK > 0:
		return ActionPushed
	case d.Failed+d.Joined > 0:
		return ActionFailed
	case d.Held > 0:
		return ActionHeld
	case d.Duplicate > 0:
		return ActionDuplicate
	default:
		return ActionFailed // due, but there was no target to push to
	}
}

// Retryable reports whether a target failed in a way that may pass.
func (d *Push) Retryable() bool {
	for _, r := range d.Results {
		if r.Err != nil && r.Retryable {
			return true
		}
	}
	return false
}

type outcome int

const (
	outcomeNone      outcome = iota // not for this target (Push.Phone)
	outcomePushed                   // this call pushed; see err
	outcomeDuplicate                // accepted before, or by a concurrent request
	outcomeJoined                   // a concurrent request's push failed; err is its error
	outcomeHeld                     // storm control held it for the summary
)

type slot struct {
	outcome outcome
	err     *notify.Error
}

// Send pushes every push to every target concurrently, at most
// MaxParallel at a time, and fills in the outcomes; it records nothing
// (Record writes the run log's line, Event the history's). Pushes with a
// key skip targets that accepted the same alert within the dedup window;
// storm control holds back those past a target's limit. What they held is
// saved before Send returns.
//
// A push's goroutine starts only once it holds a slot, so a group of
// 12,000 alerts costs MaxParallel goroutines, not one per alert and target;
// once ctx ends, the pushes not yet started fail at once, without a
// goroutine, so the answer stays in time. Failures are logged once per
// target for the whole call, not once per push.
func (b *Pipeline) Send(ctx context.Context, ds []*Push) {
	batch := b.NewBatch()
	batch.Send(ctx, ds)
	batch.Close()
}

// A Batch sends pushes in parts, as Send does, and saves what they held
// once, at Close: for a caller that sends a large group in parts to bound
// its memory but answers once (the webhook). Saving after every part wrote
// the whole state file, dedup memory included, two dozen times for one
// body of 12,000 alerts.
type Batch struct {
	b            *Pipeline
	held, pushed bool
}

// NewBatch starts a batch; call Close before telling anyone the outcome
// (inside delivery, a save at once of everything changed serves too).
func (b *Pipeline) NewBatch() *Batch { return &Batch{b: b} }

// Send delivers ds as Pipeline.Send does, but leaves the save to Close.
func (x *Batch) Send(ctx context.Context, ds []*Push) {
	b := x.b
	targets := b.current()
	if len(targets) == 0 || len(ds) == 0 {
		return
	}
	r := newDeliveryRun(b, ctx, targets, len(ds))
	for i, d := range ds {
		for j := range targets {
			r.start(i, j, d)
		}
	}
	r.wg.Wait()
	r.awaitConcurrentCopies()
	b.logFailures(targets, r.slots)
	r.tally(ds)
	for _, d := range ds {
		x.held, x.pushed = x.held || d.Held > 0, x.pushed || d.OK > 0
	}
}

// Close saves what the batch changed. A held alert is saved before anyone
// is told: one answered 200 must survive a crash (while saves fail, it
// tries at most once a second, and the retry's timer saves it once the
// disk takes it). The dedup memory of a push is saved within a second
// (saveSoon): under a load of many webhooks a second, one save serves them
// all, and a crash can repeat a push of the last second at worst.
func (x *Batch) Close() {
	switch {
	case x.held:
		x.b.saveStateThrough(x.b.changed())
	case x.pushed:
		x.b.changed()
		x.b.saveSoon()
	}
	x.held, x.pushed = false, false
}

// deliveryRun is one deliver call's state: a slot per delivery and target.
type deliveryRun struct {
	b       *Pipeline
	ctx     context.Context
	targets []notify.Notifier
	sem     chan struct{}
	slots   [][]slot
	wg      sync.WaitGroup
	waiters []waiter
	expired *notify.Error // the failure of every push ctx ended before it started
	// down holds, per target, the failure that showed it cannot be
	// reached (refused, unreachable, unknown host, TLS): the call's
	// remaining pushes to it fail with that class without a dial, as
	// Alertmanager's retry of the group will try them all again.
	down []atomic.Pointer[notify.Error]
	// allowed is storm control's answer for push i at a phone, asked once:
	// a phone's Bark and ntfy targets are one budget, so one push to both
	// counts once, and both push it or both hold it.
	allowed map[phoneOf]bool
}

type phoneOf struct {
	push  int
	phone string
}

// allow asks storm control once per push and phone whether push i may go
// out; start runs in one goroutine, so the map needs no lock.
func (r *deliveryRun) allow(i int, d *Push, phone string) bool {
	k := phoneOf{i, phone}
	if ok, asked := r.allowed[k]; asked {
		return ok
	}
	ok := r.b.storm.Allow(phone, d.Storm, r.b.cfg.Now())
	if r.allowed == nil {
		// Sized for one phone: a map grown a push at a time cost a body
		// of 12,000 alerts several megabytes of garbage.
		r.allowed = make(map[phoneOf]bool, len(r.slots))
	}
	r.allowed[k] = ok
	return ok
}

func newDeliveryRun(b *Pipeline, ctx context.Context, targets []notify.Notifier, n int) *deliveryRun {
	r := &deliveryRun{
		b: b, ctx: ctx, targets: targets,
		sem:   make(chan struct{}, b.cfg.MaxParallel),
		slots: make([][]slot, n),
		down:  make([]atomic.Pointer[notify.Error], len(targets)),
	}
	for i := range r.slots {
		r.slots[i] = make([]slot, len(targets))
	}
	return r
}

// start decides what becomes of delivery i at target j: nothing (another
// target's), a duplicate, a wait on a concurrent copy, held back, or a
// push, which starts once it holds a slot.
func (r *deliveryRun) start(i, j int, d *Push) {
	n, s := r.targets[j], &r.slots[i][j]
	if d.Phone != "" && d.Phone != n.Phone() {
		return
	}
	entry, claimed := r.claim(d, n, s)
	if !claimed {
		return
	}
	if d.Storm != nil && !r.allow(i, d, n.Phone()) {
		// Held for the summary: remembered as sent, so Alertmanager's
		// retries and an HA copy are duplicates rather than more held alerts.
		s.outcome = outcomeHeld
		r.b.dedup.finish(entry, nil)
		return
	}
	s.outcome = outcomePushed
	if s.err = r.failFast(j); s.err != nil {
		r.b.countFailure(n, s.err)
		r.b.dedup.finish(entry, s.err)
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() { <-r.sem }()
		s.err = r.b.push(r.ctx, n, d.Message)
		if s.err != nil && s.err.Unreachable {
			r.down[j].CompareAndSwap(nil, s.err)
		}
		r.b.dedup.finish(entry, s.err)
	}()
}

// claim takes the dedup entry of a keyed delivery; claimed is false when
// the target accepted it already or a concurrent request is pushing it
// (waited on once this call's own pushes are done: they never wait on
// anything, so no two requests can wait on each other). A delivery
// without a key is always claimed, with a nil entry.
func (r *deliveryRun) claim(d *Push, n notify.Notifier, s *slot) (entry *dedupEntry, claimed bool) {
	if d.Key == nil {
		return nil, true
	}
	e, state := r.b.dedup.claim(dedupKey{target: n.Identity(), alert: *d.Key}, r.b.cfg.Now())
	switch state {
	case claimSent:
		s.outcome = outcomeDuplicate
		return nil, false
	case claimPending:
		r.waiters = append(r.waiters, waiter{e, s})
		return nil, false
	}
	return e, true
}

// failFast takes a slot for a push to target j, or returns the failure
// that makes the push pointless: the target is down, or ctx ended first.
func (r *deliveryRun) failFast(j int) *notify.Error {
	if err := r.down[j].Load(); err != nil {
		return err
	}
	if !acquire(r.ctx, r.sem) {
		// Never started: fail it now, so the answer stays in time.
		if r.expired == nil {
			r.expired = notify.Classify(r.ctx, r.ctx.Err(), nil)
		}
		return r.expired
	}
	return nil
}

// awaitConcurrentCopies waits for the pushes of concurrent requests this
// call found pending.
func (r *deliveryRun) awaitConcurrentCopies() {
	for _, w := range r.waiters {
		r.b.await(r.ctx, w.entry, w.slot)
	}
}

// tally folds the slots into each delivery's counts and results.
func (r *deliveryRun) tally(ds []*Push) {
	for i, d := range ds {
		for j, n := range r.targets {
			s := r.slots[i][j]
			switch s.outcome {
			case outcomeNone:
				continue
			case outcomeDuplicate:
				d.Duplicate++
				continue
			case outcomeHeld:
				d.Held++
				continue
			case outcomePushed:
				if s.err == nil {
					d.OK++
				} else {
					d.Failed++
				}
			case outcomeJoined:
				d.Joined++
			}
			res := Result{Target: n.Name()}
			if s.err != nil {
				res.Err, res.Retryable = s.err, s.err.Retryable
			}
			if d.Results == nil {
				d.Results = make([]Result, 0, len(r.targets))
			}
			d.Results = append(d.Results, res)
		}
	}
}

type waiter struct {
	entry *dedupEntry
	slot  *slot
}

// acquire takes a slot of sem unless ctx ends first.
func acquire(ctx context.Context, sem chan struct{}) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case sem <- struct{}{}:
		if ctx.Err() != nil { // both were ready and select picked this one
			<-sem
			return false
		}
		return true
	case <-ctx.Done():
		return false
	}
}

// logFailures writes one WARN line per target that failed in this call,
// with the number of pushes and failures, and one debug line with the
// first failure's detail: a 12,000-alert group against a Bark that is down
// must not write 12,000 lines per target.
func (b *Pipeline) logFailures(targets []notify.Notifier, slots [][]slot) {
	for j, n := range targets {
		var (
			pushes, failed int
			first          *notify.Error
			classes        = map[string]int{}
		)
		for i := range slots {
			s := slots[i][j]
			if s.outcome != outcomePushed {
				continue
			}
			pushes++
			if s.err != nil {
				failed++
				classes[s.err.Class]++
				if first == nil {
					first = s.err
				}
			}
		}
		if first == nil {
			continue
		}
		attrs := []any{"pushes", pushes, "failed", failed}
		if len(classes) > 1 {
			attrs = append(attrs, "classes", classCounts(classes))
		}
		b.logger.Warn("push failed", append([]any{"target", n.Name(), "class", first.Class}, attrs...)...)
		if first.Detail != "" {
			b.logger.Debug("push failure detail", "target", n.Name(), "detail", first.Detail)
		}
	}
}

// classCounts is "connection refused=3 timeout=11997", sorted by class.
func classCounts(classes map[string]int) string {
	keys := make([]string, 0, len(classes))
	for k := range classes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Itoa(classes[k])
	}
	return strings.Join(parts, " ")
}

// await waits for a concurrent request's push of the same alert to the same
// target, so an HA pair's simultaneous copies push once.
func (b *Pipeline) await(ctx context.Context, e *dedupEntry, s *slot) {
	select {
	case <-e.done:
		if e.ok {
			s.outcome = outcomeDuplicate
			return
		}
		s.outcome, s.err = outcomeJoined, e.err
	case <-ctx.Done():
		s.outcome, s.err = outcomeJoined, &notify.Error{Class: "timeout", Retryable: true}
	}
}

// push sends one push through the retry stage within its own timeout,
// and records metrics and logs.
func (b *Pipeline) push(ctx context.Context, n notify.Notifier, p notify.Message) *notify.Error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	err := b.cfg.Retry.notify(ctx, n, p,
		func(took time.Duration) { b.metrics.pushDuration.Observe(took.Seconds()) },
		func(*notify.Error) { b.metrics.retries.WithLabelValues(n.Name()).Inc() })
	if err != nil {
		b.countFailure(n, err)
		return err
	}
	b.metrics.pushes.WithLabelValues(n.Name(), "ok").Inc()
	b.history.target(n.Name(), "ok", b.cfg.Now())
	return nil
}

// countFailure counts a failed push; deliver logs the failures of a call
// together (logFailures).
func (b *Pipeline) countFailure(n notify.Notifier, err *notify.Error) {
	b.metrics.pushes.WithLabelValues(n.Name(), "failed").Inc()
	b.history.target(n.Name(), "failed: "+err.Class, b.cfg.Now())
}

// Record writes the run-log line of a push attempt; a push that went to
// no target (all duplicates, or no targets) made no attempt.
func (b *Pipeline) Record(d *Push) {
	if d.OK+d.Failed == 0 {
		return
	}
	if err := runlog.AppendCurrent(b.cfg.Runlog, RunlogLine(Subject(d.Subject), d.OK, d.Failed)); err != nil {
		// The push went out; only its record is lost. Counted always,
		// logged once a minute at most: a full disk fails every append.
		b.cfg.WriteErrors.Inc()
		if logIt, suppressed := b.logErrors.Report(); logIt {
			b.logger.Warn("[bark] run log append failed; pushes go on", "err", err, "suppressed_since_last_report", suppressed)
		}
	}
}

// ErrNoTargets is answered when a push was due but there is nowhere to send it.
var ErrNoTargets = errors.New("no targets configured (*.bark.env, *.ntfy.env)")

// stormTick is how often Run looks for summaries that are due: a held
// alert waits at most this long past its window.
const stormTick = time.Second

// Run sends storm control's summary pushes as they fall due, until ctx
// ends; alerts held before a restart whose minute is over go out at once.
// The serving commands run it beside the webhook, and call Flush once it
// has ended; without it, held alerts are counted but never summarised.
//
// A summary on the wire when ctx ends finishes, within the push timeout:
// cut off, it would count as failed, and Flush would send it a second
// time though Bark had it.
func (b *Pipeline) Run(ctx context.Context) {
	pushCtx := context.WithoutCancel(ctx)
	b.SendDue(pushCtx, b.cfg.Now())
	b.storm.run(ctx, stormTick, b.cfg.Now, func(s stormSummary) { b.sendSummary(pushCtx, s) })
}

// Flush sends every held alert now, one summary per target, whatever the
// window, all at once and within ctx: at a stop, held alerts have no later
// minute to go out in. A summary that fails stays held in the state file,
// for the next start. Call it once Run has ended and the webhook has
// stopped taking requests.
func (b *Pipeline) Flush(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range b.storm.All(b.cfg.Now()) {
		wg.Go(func() { b.sendSummary(ctx, s) })
	}
	wg.Wait()
	b.saveState()
}

// SendDue sends the summaries due at now; Run does it every tick, and
// tests call it with their own clock.
func (b *Pipeline) SendDue(ctx context.Context, now time.Time) {
	for _, s := range b.storm.Due(now) {
		b.sendSummary(ctx, s)
	}
}

// sendSummary pushes one summary, "[lavender-2] 37 more alerts in the last
// minute: SwapUsageHigh ×30, PhaseStalled ×7", to its phone's targets only, without
// an id (it stands for many incidents) and with one BARK line.
//
// A summary no target accepted is held again, to go out with the next one
// (or, at a stop, after the next start), so Bark being down loses nothing.
func (b *Pipeline) sendSummary(ctx context.Context, s stormSummary) {
	d := &Push{Subject: s.Subject(), Message: notify.Message{Text: s.Text}, Phone: s.Target}
	// Not Send: its save of a push that went out waits up to a second, and
	// the save below, at once, would then write the file a second time.
	b.NewBatch().Send(ctx, []*Push{d})
	b.Record(d)
	if d.OK+d.Failed > 0 {
		b.history.event(d.Event("storm", "summary", d.Action(), b.cfg.Now()))
	}
	if d.OK == 0 {
		if dropped := b.storm.requeue(s); dropped > 0 {
			b.logger.Warn("[bark] summary not sent, and its target is no longer configured; its alerts are dropped", "target", s.Target, "alerts", dropped)
		}
	}
	// Saved at once either way, the batch's change with it: a crash must
	// neither lose the alerts of a failed summary nor send a sent one again.
	b.saveStateThrough(b.changed())
}
