package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/alertmanager/template"
	"github.com/prometheus/common/model"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/runlog"
)

// webhookVersion is the only payload version Alertmanager has sent so far.
const webhookVersion = "4"

// WebhookMessage is Alertmanager's webhook payload (notify/webhook.Message),
// declared here because importing notify/webhook costs ~320 packages.
// Unknown fields, which newer Alertmanagers add, are ignored.
type WebhookMessage struct {
	template.Data

	Version         string `json:"version"`
	GroupKey        string `json:"groupKey"`
	TruncatedAlerts uint64 `json:"truncatedAlerts"`
}

// decodeWebhook parses a webhook body. It accepts version "4" only.
func decodeWebhook(body []byte) (*WebhookMessage, error) {
	var msg WebhookMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if msg.Version != webhookVersion {
		return nil, fmt.Errorf("unsupported webhook version %q, want %q", runlog.Truncate(msg.Version, 32), webhookVersion)
	}
	return &msg, nil
}

// planned is what the bridge does with one alert.
type planned struct {
	status string // "firing", "resolved" or "unknown": the metric label
	name   string // the alert name, for the status page
	alert  int    // its index in the message's alerts
	// delivery is the push, built by planPush for the chunk that sends it
	// and dropped once folded; nil: skipped, or not built yet.
	delivery *delivery.Push
}

// plan lists every alert in msg with its status and name. The pushes are
// built a chunk at a time (planPush), so that a body of thousands of
// alerts never holds all of its pushes at once.
func (b *Handler) plan(msg *WebhookMessage) []planned {
	out := make([]planned, 0, len(msg.Alerts))
	for i, a := range msg.Alerts {
		p := planned{status: a.Status, name: a.Labels[model.AlertNameLabel], alert: i}
		if p.status != "firing" && p.status != "resolved" {
			p.status = "unknown"
		}
		out = append(out, p)
	}
	return out
}

// planPush decides whether and what to push for the alert p stands for;
// nil: nothing. It never fails: an alert with missing or odd annotations
// still gets a message.
func (b *Handler) planPush(msg *WebhookMessage, p planned) *delivery.Push {
	if p.status == "unknown" {
		return nil
	}
	a := msg.Alerts[p.alert]
	d := b.planAlert(a)
	if d == nil {
		return nil
	}
	fp := fingerprint(a)
	d.Key = &delivery.Key{Incident: delivery.AlertIncident(fp, a.StartsAt.UnixNano()), Status: a.Status}
	b.delivery.Incident(d, incidentID(fp, a.StartsAt), hostOf(a.Labels["instance"]), a.Status == "resolved")
	d.Storm = []delivery.StormEvent{delivery.AlertEvent(a.Labels[model.AlertNameLabel], a.Status == "resolved")}
	d.Tags = tags(alertName(a), a.Status == "resolved")
	return d
}

// push is the push of t, after the prefix.
func (b *Handler) push(t pushtext.Text) *delivery.Push {
	return delivery.NewPush(t.Subject, pushtext.WithPrefix(b.cfg.Prefix, t.Body))
}

// hostOf is the host of an instance label ("gpu-3:9100" → "gpu-3"): a user
// mutes a host, not one of its exporters' ports.
func hostOf(instance string) string {
	instance = strings.TrimSpace(instance)
	if host, _, err := net.SplitHostPort(instance); err == nil {
		return host
	}
	return instance
}

func alertName(a template.Alert) string {
	if name := strings.TrimSpace(a.Labels[model.AlertNameLabel]); name != "" {
		return name
	}
	return "unnamed alert"
}

func (b *Handler) planAlert(a template.Alert) *delivery.Push {
	name := alertName(a)
	summary := strings.TrimSpace(a.Annotations[annotationSumm])
	isSwap := name == b.cfg.SwapAlertname
	resolved := a.Status == "resolved"
	var lastedFor time.Duration // 0: unknown
	if resolved && !a.EndsAt.IsZero() && !a.StartsAt.IsZero() {
		lastedFor = a.EndsAt.Sub(a.StartsAt)
	}
	switch {
	case resolved && !b.cfg.SendResolved, !isSwap && b.cfg.OnlySwap:
		return nil
	case resolved && eventAlert(name):
		return nil // an event's resolution only means the rule's window passed
	case isSwap && resolved:
		// Prometheus resolves an alert with the annotations of its last
		// firing evaluation: their figures are from before swap fell and
		// would read as swap's now. What the resolution means is that swap
		// fell under the rule's threshold. --bark.threshold is not that
		// threshold: under the rule's, it would say more than is known.
		threshold, _ := parseRatio(a.Annotations[annotationSwapThreshold])
		return b.push(pushtext.SwapBackUnder(threshold, lastedFor))
	case isSwap:
		s, ok := swapFromAnnotations(a.Annotations)
		if ok {
			if s.Ratio < b.cfg.Threshold {
				// An alert rule set lower than the bridge's threshold would
				// otherwise be dropped without a word.
				b.logger.Info("[bark] swap alert under the bridge's threshold: not pushed",
					"alert", name, "swap_used_ratio", s.Ratio, "threshold", b.cfg.Threshold)
				return nil
			}
			return b.push(pushtext.Swap(s))
		}
		if summary != "" {
			// The summary alone: alerts.yml's swap summary is a whole text.
			return b.push(pushtext.Text{Body: summary, Subject: name})
		}
		return b.push(pushtext.Named(name, ""))
	case resolved:
		return b.push(pushtext.Resolved(pushtext.Named(name, ""), lastedFor))
	case name == PressureAlertname:
		if p, ok := pressureFromAnnotations(a.Annotations); ok {
			return b.push(pushtext.Pressure(p))
		}
	case name == OOMAlertname:
		if o, ok := oomFromAnnotations(a.Annotations); ok {
			return b.push(pushtext.OOM(o))
		}
	case name == PhaseFailedAlertname, name == PhaseStalledAlertname, name == PhaseProgressStalledAlertname:
		if p, ok := phaseFromAnnotations(name, a.Annotations); ok {
			return b.push(pushtext.Phase(p))
		}
	case name == DiskSaveAlertname, name == DiskSpaceAlertname, name == DiskInodesAlertname, name == DiskUnreadableAlertname:
		if t, ok := diskText(name, a, b.delivery.Now()); ok {
			return b.push(t)
		}
	case name == PhaseLossAlertname:
		if l, ok := lossFromAnnotations(a.Annotations); ok {
			return b.push(pushtext.Loss(l))
		}
	case name == GPUXidAlertname, name == GPUFallenOffAlertname, name == StorageErrorsAlertname:
		if t, ok := kernelFaultText(name, a); ok {
			return b.push(t)
		}
	case name == GPULostAlertname, name == GPURemapPendingAlertname, name == GPURemapFailedAlertname:
		if t, ok := gpuTelemetryText(name, a); ok {
			return b.push(t)
		}
	}
	return b.push(pushtext.Named(name, summary))
}

// fingerprint is Alertmanager's, or one computed the same way from the
// labels when a hand-made payload leaves it out.
func fingerprint(a template.Alert) string {
	if a.Fingerprint != "" {
		return a.Fingerprint
	}
	ls := make(model.LabelSet, len(a.Labels))
	for k, v := range a.Labels {
		ls[model.LabelName(k)] = model.LabelValue(v)
	}
	return ls.Fingerprint().String()
}

// WebhookPath is where Alertmanager posts its notifications.
const WebhookPath = "/webhook"

// Register adds POST WebhookPath to mux.
func (b *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc(WebhookPath, b.serveWebhook)
}

// maxAnswerLines bounds the failure lines in a webhook's answer, which
// Alertmanager copies into its own log.
const maxAnswerLines = 10

// maxRunlogLines bounds the BARK lines one webhook writes: a group of
// thousands of alerts gets one line for each of the first ten and one for
// the rest together ("BARK 11990 more alerts sent ok=0 fail=59950"), since
// the run log keeps about 1 KB anyway and each line is a locked append.
const maxRunlogLines = 10

// deliverChunk is how many alerts' pushes are in the works at once; their
// per-target state is folded into the answer before the next chunk starts.
const deliverChunk = 512

// serveWebhook answers as Alertmanager's retry logic reads it: 200 when
// every push was accepted or failed for good, 503 when one may pass on a
// retry (which then reaches only the targets that have not accepted), 400
// for a body that will never parse, 413 for one too big, 405 for a method.
func (b *Handler) serveWebhook(w http.ResponseWriter, r *http.Request) {
	code, text, bodyBytes := b.handleWebhook(r)
	b.metrics.requests.WithLabelValues(strconv.Itoa(code)).Inc()
	if code == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", http.MethodPost)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	io.WriteString(w, text)
	if bodyBytes >= releaseAfterBytes {
		go releaseMemory()
	}
}

// releaseAfterBytes is the body size from which a webhook hands its
// garbage back to the OS once answered: thousands of alerts leave tens of
// MiB, which the runtime would otherwise keep until its next forced GC
// minutes later, while a training box is short of memory now.
const releaseAfterBytes = 256 << 10

var releaseMu sync.Mutex

// releaseMemory runs a GC and returns freed memory to the OS, one call at a
// time, so that concurrent large webhooks release one after the other.
func releaseMemory() {
	releaseMu.Lock()
	defer releaseMu.Unlock()
	debug.FreeOSMemory()
}

// handleWebhook answers a webhook request: it reads and decodes the body,
// plans a push per alert, delivers them in chunks while folding each
// alert's outcome into the tally, and answers from the tally. bodyBytes is
// the size of the body it read.
func (b *Handler) handleWebhook(r *http.Request) (code int, text string, bodyBytes int) {
	msg, received, bodyBytes, code, text := b.readWebhook(r)
	if msg == nil {
		return code, text, bodyBytes
	}
	// Pushes outlive a disconnecting client, so that a push Bark accepts is
	// remembered and Alertmanager's retry does not repeat it; the timeout
	// still bounds the answer.
	ctx, cancel := context.WithDeadline(context.WithoutCancel(r.Context()), received.Add(b.cfg.Timeout))
	defer cancel()
	plans := b.plan(msg)
	t := &webhookTally{b: b, firstEvent: max(0, len(plans)-delivery.MaxEvents)}
	due := b.deliverInChunks(ctx, msg, plans, t.fold)
	noTargets := b.warnIfNoTargets(due)
	t.recordRest()
	return t.status(), t.answer(len(plans), noTargets), bodyBytes
}

// readWebhook reads and decodes a webhook body. On failure msg is nil and
// code and text are the answer. received is when the body was in: the
// answer's clock starts then, so decoding a large one counts against the
// timeout, not against the margin after it.
func (b *Handler) readWebhook(r *http.Request) (msg *WebhookMessage, received time.Time, bodyBytes, code int, text string) {
	if r.Method != http.MethodPost {
		return nil, received, 0, http.StatusMethodNotAllowed, "only POST requests allowed\n"
	}
	tooBig := fmt.Sprintf("body over the limit of %d bytes\n", b.cfg.MaxBodyBytes)
	if r.ContentLength > b.cfg.MaxBodyBytes {
		return nil, received, 0, http.StatusRequestEntityTooLarge, tooBig
	}
	// Sized from Content-Length when there is one, so a large body is read
	// into one allocation rather than a doubling series of them.
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, b.cfg.MaxBodyBytes+1)); err != nil {
		return nil, received, buf.Len(), http.StatusBadRequest, "reading body failed\n"
	}
	received = time.Now()
	body := buf.Bytes()
	bodyBytes = len(body) // body itself must not stay alive past decoding
	if int64(len(body)) > b.cfg.MaxBodyBytes {
		return nil, received, bodyBytes, http.StatusRequestEntityTooLarge, tooBig
	}
	msg, err := decodeWebhook(body)
	if err != nil {
		b.logger.Warn("[bark] webhook rejected", "err", err)
		return nil, received, bodyBytes, http.StatusBadRequest, err.Error() + "\n"
	}
	if msg.TruncatedAlerts > 0 {
		b.logger.Warn("[bark] Alertmanager truncated the group; raise max_alerts to see them all",
			"truncated", msg.TruncatedAlerts)
	}
	return msg, received, bodyBytes, http.StatusOK, ""
}

// warnIfNoTargets logs, and reports, that due pushes found no target to
// send them to.
func (b *Handler) warnIfNoTargets(due int) bool {
	if due == 0 || len(b.delivery.Targets()) > 0 {
		return false
	}
	b.logger.Warn("[bark] alerts not pushed", "reason", delivery.ErrNoTargets.Error(), "alerts", due)
	return true
}

// deliverInChunks builds and delivers the pushes of plans deliverChunk
// alerts at a time and calls fold for every alert, in order, once its
// chunk is done; a folded push is dropped. So the pushes and per-target
// state of a group of thousands of alerts are never all alive at once:
// memory stays bounded whatever the body's size. What the chunks held is
// saved once, at the end, before the answer. It returns how many pushes
// were due.
func (b *Handler) deliverInChunks(ctx context.Context, msg *WebhookMessage, plans []planned, fold func(int, planned)) (due int) {
	var (
		chunk  []*delivery.Push
		folded int
	)
	batch := b.delivery.NewBatch()
	defer batch.Close()
	flush := func(upTo int) {
		batch.Send(ctx, chunk)
		clear(chunk)
		chunk = chunk[:0]
		for ; folded < upTo; folded++ {
			fold(folded, plans[folded])
			plans[folded].delivery = nil
			msg.Alerts[plans[folded].alert] = template.Alert{} // its labels and annotations go too
		}
	}
	for i := range plans {
		d := b.planPush(msg, plans[i])
		if d == nil {
			continue
		}
		plans[i].delivery = d
		due++
		chunk = append(chunk, d)
		if len(chunk) == deliverChunk {
			flush(i + 1)
		}
	}
	flush(len(plans))
	return due
}

// webhookTally is what a webhook's alerts came to: the counts of the
// answer, its failure lines, and the run log's lines.
type webhookTally struct {
	b                                  *Handler
	firstEvent                         int // only the newest delivery.MaxEvents reach the status page
	retry                              bool
	pushed, failed, skipped, dup, held int
	failures                           []string // the first maxAnswerLines
	moreFailures                       int
	recorded                           int           // BARK lines written
	rest                               delivery.Push // the run-log tally past maxRunlogLines
	restAlerts                         int
}

// fold takes one alert's outcome into the answer, the metrics, the run
// log and the status page, then drops its per-target results.
func (t *webhookTally) fold(i int, p planned) {
	action := ActionSkipped // filtered out, or below the threshold
	if d := p.delivery; d != nil {
		t.record(d)
		action = d.Action()
		t.retry = t.retry || d.Retryable()
		t.addFailures(d)
	}
	switch action {
	case delivery.ActionPushed:
		t.pushed++
	case delivery.ActionFailed:
		t.failed++
	case delivery.ActionDuplicate:
		t.dup++
	case delivery.ActionHeld:
		t.held++
	default:
		t.skipped++
	}
	b := t.b
	b.metrics.alerts.WithLabelValues(p.status, action).Inc()
	if i >= t.firstEvent {
		if d := p.delivery; d != nil {
			b.delivery.AddEvent(d.Event("webhook", p.status, action, b.delivery.Now()))
		} else {
			b.delivery.AddEvent(delivery.Event{Time: b.delivery.Now(), Source: "webhook", Status: p.status, Subject: delivery.Subject(p.name), Action: action})
		}
	}
	if p.delivery != nil {
		p.delivery.Results = nil
	}
}

// record writes the BARK line of a push attempt, one for each of the
// first maxRunlogLines alerts and the rest together (recordRest).
func (t *webhookTally) record(d *delivery.Push) {
	if d.OK+d.Failed == 0 {
		return
	}
	if t.recorded < maxRunlogLines {
		t.b.delivery.Record(d)
		t.recorded++
		return
	}
	t.restAlerts++
	t.rest.OK += d.OK
	t.rest.Failed += d.Failed
}

func (t *webhookTally) recordRest() {
	if t.restAlerts > 0 {
		t.rest.Subject = strconv.Itoa(t.restAlerts) + " more alerts"
		t.b.delivery.Record(&t.rest)
	}
}

func (t *webhookTally) addFailures(d *delivery.Push) {
	for _, res := range d.Results {
		if res.Err == nil {
			continue
		}
		if len(t.failures) < maxAnswerLines {
			t.failures = append(t.failures, d.Subject+": "+res.String())
		} else {
			t.moreFailures++
		}
	}
}

// status is 503 when a failure may pass on Alertmanager's retry, else 200.
func (t *webhookTally) status() int {
	if t.retry {
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// answer is the body Alertmanager logs: the counts, then the failures.
func (t *webhookTally) answer(alerts int, noTargets bool) string {
	var answer strings.Builder
	fmt.Fprintf(&answer, "alerts=%d pushed=%d failed=%d skipped=%d duplicate=%d", alerts, t.pushed, t.failed, t.skipped, t.dup)
	if t.held > 0 {
		fmt.Fprintf(&answer, " held=%d", t.held)
	}
	answer.WriteString("\n")
	if noTargets {
		answer.WriteString(delivery.ErrNoTargets.Error() + "\n")
	}
	for _, f := range t.failures {
		answer.WriteString(runlog.Truncate(strings.Join(strings.Fields(textsafe.Sanitize(f)), " "), 200) + "\n")
	}
	if t.moreFailures > 0 {
		fmt.Fprintf(&answer, "… and %d more failures\n", t.moreFailures)
	}
	return answer.String()
}

// incidentID is the incident id of an Alertmanager alert. The
// fingerprint (a hash of the label set) and startsAt are what every copy of
// one incident shares: HA peers, retries, reminders and the resolved
// notification, so a later push replaces the earlier notification. A new
// incident of the same alert starts later, so it gets a new id. startsAt
// counts as an instant, so the time zone it was written in does not matter.
func incidentID(fingerprint string, startsAt time.Time) string {
	return delivery.IncidentID("alertmanager", fingerprint, strconv.FormatInt(startsAt.UnixNano(), 10))
}
