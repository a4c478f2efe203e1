// Package ntfy is lavender's ntfy client, on its own: the targets (topic
// URLs and where their tokens are, in *.ntfy.env files), ntfy's headers,
// sending, sequence ids, and the classes of failure, in the shape of
// Alertmanager's notifiers (New, Notify (retry, err)). It knows nothing of
// Alertmanager, the watchdog, phases or the run log.
//
// Tokens and passwords are read from files or the environment when the
// targets load, and go to ntfy in the Authorization header and nowhere
// else: never in a URL (ntfy logs the request URI with its query), never
// in an error, a log line or a formatted Target.
package ntfy

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/notify"
)

// ChannelName names ntfy's channel in logs, metrics and pages.
const ChannelName = "ntfy"

// MaxMessageBytes bounds a push's text, "…" included. ntfy reads at most
// message-size-limit (4096) bytes of a body as the message, and a body
// that fills all 4096 is taken for a file: it becomes an attachment (or a
// 400 where attachments are off), which a phone shows as "You received a
// file". 4095 is the most that is always a message.
const MaxMessageBytes = 4095

// maxTitleBytes bounds a title. ntfy sets none, but the title and the text
// share the ~4 KiB push payload of FCM and APNs, and a lock screen shows a
// line of it.
const maxTitleBytes = 250

// Tags are emoji short codes ("warning", "rotating_light") or short words;
// more than a few are noise on a lock screen.
const (
	maxTags     = 8
	maxTagBytes = 64
)

// maxResponseBytes bounds how much of ntfy's answer is read; its JSON is
// well under 1 KiB.
const maxResponseBytes = 64 << 10

// maxIncidents bounds the memory of first pushes per incident (see
// Incident): enough for every incident open at once on a busy cluster.
const maxIncidents = 512

// Clip is the text a push carries for s: sanitized (textsafe.Sanitize) and
// cut to MaxMessageBytes with "…" where no emoji is split. Notify clips
// every message; a caller that records what it pushed clips it the same
// way first.
func Clip(s string) string { return textsafe.Truncate(textsafe.Sanitize(s), MaxMessageBytes) }

// Priority is ntfy's priority for a level: passive 2 (low: no sound),
// active 3 (default), timeSensitive 4 (high), critical 5 (max: a long
// vibration and a pop-over on Android). An unknown level is 3.
func Priority(level string) int {
	switch notify.LevelOr(level) {
	case notify.LevelPassive:
		return 2
	case notify.LevelActive:
		return 3
	case notify.LevelTimeSensitive:
		return 4
	case notify.LevelCritical:
		return 5
	}
	return 3
}

// sequenceIDRegex is what a sequence id may be: a message id's alphabet
// and a topic's length, safe in a path segment and a header.
var sequenceIDRegex = lazyregexp.New(`^[-_A-Za-z0-9]{1,64}$`)

// SequenceID is the ntfy sequence id of an incident id: the id itself when
// it is safe in a path and a header (lavender's are hex), else a hash of
// it, so every push of one incident gets the same one.
func SequenceID(id string) string {
	if id == "" || sequenceIDRegex.MatchString(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h" + hex.EncodeToString(sum[:12])
}

// Reply is what ntfy answered to an accepted push: its message id and the
// server's time, for the status page and for saying which push a resolved
// message ends.
type Reply struct {
	ID         string // ntfy's message id
	Time       int64  // unix seconds, the server's clock
	Expires    int64  // unix seconds when the server drops it from its cache; 0: not cached
	Event      string // "message"; a delete's answer may name its own event
	SequenceID string // the sequence id the server kept; "" from a server before 2.16
	Title      string // the title pushed, after clipping
}

// Notifier pushes to one target, in the manner of Alertmanager's
// notifiers: its credential was read once, when the target was loaded,
// every message is clipped (Clip) and every failure is a short class with
// the credential scrubbed. It learns, from each answer, whether the server
// keeps sequence ids.
type Notifier struct {
	target    Target
	client    *http.Client
	userAgent string

	mu sync.Mutex
	// sequences: whether the server keeps sequence ids, as its last
	// answer to a push that carried one said: 0 not known yet, 1 yes, -1 no.
	sequences int
	last      Reply
	hasLast   bool
	incidents map[string]*incident
	order     []string // incident ids, oldest first, for the bound
}

// incident is what the notifier remembers of one incident's pushes.
type incident struct{ first, last Reply }

// New returns the notifier of t. client sends the pushes (nil: a shared
// client that honours the proxy environment); a copy of it that refuses
// redirects is used: Go forwards the Authorization header to a redirect on
// the same host or a subdomain, and a push that went elsewhere did not
// reach the topic anyway.
// Each push's deadline comes from its context. userAgent "" is "lavender".
func New(t Target, client *http.Client, userAgent string) *Notifier {
	if userAgent == "" {
		userAgent = "lavender"
	}
	if client == nil {
		client = sharedClient()
	} else {
		hc := *client
		hc.CheckRedirect = notify.RefuseRedirects
		client = &hc
	}
	return &Notifier{target: t, client: client, userAgent: userAgent, incidents: map[string]*incident{}}
}

var _ notify.Notifier = (*Notifier)(nil)

// Target is the notifier's target.
func (n *Notifier) Target() Target { return n.target }

// Name is the target's file:line.
func (n *Notifier) Name() string { return n.target.Name() }

// Channel is "ntfy".
func (n *Notifier) Channel() string { return ChannelName }

// Identity is the target's secret-free identity (Target.Identity).
func (n *Notifier) Identity() string { return n.target.Identity() }

// Phone is whose phone the target reaches: the storm budget's key.
func (n *Notifier) Phone() string { return n.target.Phone() }

// String, GoString, Format and LogValue print the target's name only: the
// notifier holds its credential.
func (n *Notifier) String() string { return n.Name() }

// GoString implements fmt.GoStringer.
func (n *Notifier) GoString() string { return "ntfy.Notifier(" + n.Name() + ")" }

// Format implements fmt.Formatter, so that no verb reaches the fields.
func (n *Notifier) Format(f fmt.State, verb rune) { textsafe.FormatAs(f, verb, n.Name(), n.GoString()) }

// LogValue implements slog.LogValuer.
func (n *Notifier) LogValue() slog.Value { return slog.StringValue(n.Name()) }

// SequenceSupport is what the notifier knows of the server's sequence ids:
// "yes" (its last answer kept one, or sequence=on), "no" (it dropped one,
// or sequence=off) or "unknown" (nothing pushed with one yet).
func (n *Notifier) SequenceSupport() string {
	switch n.target.sequence {
	case SequenceOn:
		return "yes"
	case SequenceOff:
		return "no"
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch n.sequences {
	case 1:
		return "yes"
	case -1:
		return "no"
	}
	return "unknown"
}

// sequencesWork says whether a sequence id is known to replace: the target
// says so, or the server's last answer did.
func (n *Notifier) sequencesWork() bool { return n.SequenceSupport() == "yes" }

// LastReply is ntfy's answer to the last accepted push; ok is false before
// the first.
func (n *Notifier) LastReply() (r Reply, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.last, n.hasLast
}

// Incident is ntfy's answers to the first and the last accepted push of
// incident id (Message.ID); ok is false when none was accepted since the
// notifier was made, or the incident was deleted, or it fell out of the
// bounded memory.
func (n *Notifier) Incident(id string) (first, last Reply, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	in, ok := n.incidents[id]
	if !ok {
		return Reply{}, Reply{}, false
	}
	return in.first, in.last, true
}

// remember records an accepted push's reply.
func (n *Notifier) remember(id string, r Reply, sentSequence bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.last, n.hasLast = r, true
	if sentSequence {
		if r.SequenceID != "" {
			n.sequences = 1
		} else {
			n.sequences = -1
		}
	}
	if id == "" {
		return
	}
	if in, ok := n.incidents[id]; ok {
		in.last = r
		return
	}
	if len(n.order) >= maxIncidents {
		delete(n.incidents, n.order[0])
		n.order = n.order[1:]
	}
	n.incidents[id] = &incident{first: r, last: r}
	n.order = append(n.order, id)
}

// forget drops an incident once its notification was deleted.
func (n *Notifier) forget(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.incidents[id]; !ok {
		return
	}
	delete(n.incidents, id)
	n.order = slices.DeleteFunc(n.order, func(s string) bool { return s == id })
}

// learnNoSequences records that the server does not know the sequence
// routes (a delete got ntfy's own 404).
func (n *Notifier) learnNoSequences() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sequences = -1
}

// Notify pushes m once. err is nil when ntfy accepted the push, else a
// *notify.Error; retry says whether the failure may pass on a later try
// (a 5xx, 408, a 429 other than a daily quota or too many failed logins,
// a timeout or a network error).
//
// A Delete removes the incident's notification (DELETE /<topic>/<sequence
// id>, ntfy 2.16+). Where the target or the server has no sequence ids
// there is nothing to remove it by: Notify sends nothing and reports
// success, and the notification stays until the user swipes it; the
// resolved push, if one is sent, says what it resolves (see below).
//
// A Resolved message on a server that is not known to keep sequence ids
// (sequence=off, or auto before a 2.16+ answer) cannot replace the
// incident's notification, so it says which push it ends: its title is
// "Resolved: " and the first push's title, or the first push's time
// when that had none.
func (n *Notifier) Notify(ctx context.Context, m notify.Message) (retry bool, err error) {
	if pe := n.send(ctx, m); pe != nil {
		return pe.Retryable, pe
	}
	return false, nil
}

func (n *Notifier) send(ctx context.Context, m notify.Message) *notify.Error {
	t := n.target
	seq := ""
	if t.sequence != SequenceOff {
		seq = SequenceID(m.ID)
	}
	if m.Delete {
		if seq == "" || n.SequenceSupport() == "no" {
			return nil
		}
		return n.delete(ctx, m.ID, seq)
	}
	title := m.Title
	if t.title != "" {
		title = t.title
	}
	if m.Resolved && !n.sequencesWork() {
		title = n.resolvedTitle(m.ID, title)
	}
	title = clipTitle(title)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.server+"/"+t.topic, strings.NewReader(Clip(m.Text)))
	if err != nil {
		return &notify.Error{Class: "invalid URL", Detail: t.scrub(notify.Redact(err).Error())}
	}
	h := req.Header
	h.Set("Content-Type", "text/plain; charset=utf-8")
	if title != "" {
		h.Set("X-Title", headerValue(title))
	}
	h.Set("X-Priority", strconv.Itoa(Priority(m.Level)))
	if tags := Tags(m.Tags); len(tags) > 0 {
		h.Set("X-Tags", headerValue(strings.Join(tags, ",")))
	}
	if u := strings.TrimSpace(m.URL); u != "" {
		h.Set("X-Click", headerValue(u))
	}
	if seq != "" {
		h.Set("X-Sequence-ID", seq)
	}
	reply, pe := n.do(ctx, req, false)
	if pe != nil {
		return pe
	}
	reply.Title = title
	n.remember(m.ID, reply, seq != "")
	return nil
}

// resolvedTitle is the title of a resolved push that cannot replace the
// incident's notification: it names the push it resolves.
func (n *Notifier) resolvedTitle(id, title string) string {
	const prefix = "Resolved: "
	first, _, ok := n.Incident(id)
	switch {
	case ok && first.Title != "":
		title = first.Title
	case title == "" && ok && first.Time != 0:
		title = "push of " + time.Unix(first.Time, 0).UTC().Format("15:04 UTC")
	case title == "":
		return "Resolved"
	}
	if strings.HasPrefix(title, prefix) {
		return title
	}
	return prefix + title
}

// delete removes the notification of sequence id seq.
func (n *Notifier) delete(ctx context.Context, id, seq string) *notify.Error {
	t := n.target
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.server+"/"+t.topic+"/"+seq, nil)
	if err != nil {
		return &notify.Error{Class: "invalid URL", Detail: t.scrub(notify.Redact(err).Error())}
	}
	_, pe := n.do(ctx, req, true)
	if pe != nil {
		// ntfy before 2.16 has no such route and answers its own 404
		// (40401). In auto mode that is the answer to "does it keep
		// sequence ids": no, and so there is nothing to delete.
		if pe.Class == "HTTP 404" && n.target.sequence == SequenceAuto && strings.HasPrefix(pe.Detail, "ntfy 40401:") {
			n.learnNoSequences()
			return nil
		}
		return pe
	}
	n.forget(id)
	return nil
}

// errorBody is ntfy's JSON answer to a failed request (server/errors.go).
type errorBody struct {
	Code  int    `json:"code"`
	HTTP  int    `json:"http"`
	Error string `json:"error"`
}

// replyBody is ntfy's JSON answer to a publish: the stored message.
type replyBody struct {
	ID         string `json:"id"`
	Time       int64  `json:"time"`
	Expires    int64  `json:"expires"`
	Event      string `json:"event"`
	Topic      string `json:"topic"`
	SequenceID string `json:"sequence_id"`
}

// notRetryable are ntfy's 429 codes that a retry cannot pass: the daily
// message, bandwidth and call quotas clear at midnight UTC, and another
// try after too many failed logins only prolongs the ban.
var notRetryable = map[int]bool{42905: true, 42908: true, 42909: true, 42910: true}

// do sends req with the target's credential and reads ntfy's answer. A
// redirect is never followed (the client refuses them).
func (n *Notifier) do(ctx context.Context, req *http.Request, isDelete bool) (Reply, *notify.Error) {
	t := n.target
	req.Header.Set("User-Agent", n.userAgent)
	req.Header.Set("Accept", "application/json")
	if t.authorization != "" {
		req.Header.Set("Authorization", t.authorization)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return Reply{}, t.Classify(ctx, err)
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes)) // let the connection be reused
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		// A configuration error, not a passing one: ntfy itself never
		// redirects a publish; a proxy that moved (http to https) does.
		saw := "HTTP " + strconv.Itoa(resp.StatusCode)
		if loc, err := resp.Location(); err == nil {
			saw += " to " + loc.Scheme + "://" + loc.Host
		}
		saw = t.scrub(textsafe.Truncate(textsafe.Sanitize(saw), 120))
		return Reply{}, &notify.Error{Class: "redirect", Saw: saw, Detail: saw}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		pe := &notify.Error{
			Class:     "HTTP " + strconv.Itoa(resp.StatusCode),
			Retryable: notify.RetryableStatus(resp.StatusCode),
		}
		var eb errorBody
		if json.Unmarshal(body, &eb) == nil && eb.Code != 0 {
			// Scrubbed before it is cut, so that no cut-off secret escapes.
			pe.Detail = "ntfy " + strconv.Itoa(eb.Code) + ": " + textsafe.Truncate(textsafe.Sanitize(t.scrub(eb.Error)), 200)
			if notRetryable[eb.Code] {
				pe.Retryable = false
			}
		}
		return Reply{}, pe
	}
	if readErr != nil {
		// A 2xx whose body broke off: ntfy most likely kept the push, but
		// saying so would not be honest.
		pe := t.Classify(ctx, readErr)
		pe.Class = "reading answer: " + pe.Class
		return Reply{}, pe
	}
	var rb replyBody
	isNtfy := json.Unmarshal(body, &rb) == nil && rb.ID != "" && (rb.Event == "message" || isDelete && rb.Event != "")
	if !isNtfy {
		// ntfy answers every publish with the stored message; anything
		// else (its web app's HTML for a wrong path, a captive portal, a
		// proxy's page) is not ntfy, nothing was pushed, and a retry will
		// not help.
		saw := fmt.Sprintf("HTTP %d, %s, body %q", resp.StatusCode, contentType(resp), textsafe.Truncate(textsafe.Sanitize(t.scrub(string(body))), 40))
		return Reply{}, &notify.Error{Class: "not-ntfy", Saw: saw, Detail: saw}
	}
	return Reply{ID: rb.ID, Time: rb.Time, Expires: rb.Expires, Event: rb.Event, SequenceID: rb.SequenceID}, nil
}

func contentType(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		return "no Content-Type"
	}
	return textsafe.Truncate(textsafe.Sanitize(ct), 40)
}

// Classify turns a transport error of a push to t into a short class, its
// detail redacted and scrubbed of the target's credential.
func (t Target) Classify(ctx context.Context, err error) *notify.Error {
	return notify.Classify(ctx, err, t.scrub)
}

// clipTitle is a title as pushed: sanitized, on one line, cut.
func clipTitle(s string) string {
	return textsafe.Truncate(oneLine(s), maxTitleBytes)
}

// oneLine is s sanitized with its newlines as spaces: a header value.
func oneLine(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(textsafe.Sanitize(s), "\n", " "))
}

// Tags is what X-Tags carries of tags: each sanitized, on one line, without
// commas (which separate them), cut to 64 bytes; empty ones and repeats
// dropped; at most 8.
func Tags(tags []string) []string {
	var out []string
	for _, tag := range tags {
		tag = textsafe.Truncate(strings.TrimSpace(strings.ReplaceAll(oneLine(tag), ",", " ")), maxTagBytes)
		if tag == "" || slices.Contains(out, tag) {
			continue
		}
		out = append(out, tag)
		if len(out) == maxTags {
			break
		}
	}
	return out
}

// headerValue is s, already on one line, as a header value ntfy reads back
// whole: plain when it is printable ASCII, else RFC 2047 encoded words,
// which ntfy decodes in every header it reads (mime.WordDecoder).
func headerValue(s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			plain = false
			break
		}
	}
	switch {
	case plain && !strings.Contains(s, "=?"):
		return s
	case plain:
		// ASCII that holds "=?" could read as an encoded word and be
		// decoded into something else; mime leaves ASCII as it is, so
		// encode it here.
		return encodeWords(s)
	}
	return mime.BEncoding.Encode("UTF-8", s)
}

// encodeWords encodes s as RFC 2047 "B" words of at most 45 bytes of text
// each (75 characters a word, as the RFC asks).
func encodeWords(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		n := min(len(s), 45)
		for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("=?UTF-8?b?" + base64.StdEncoding.EncodeToString([]byte(s[:n])) + "?=")
		s = s[n:]
	}
	return b.String()
}

// NewClient honours the usual proxy variables and refuses redirects; each
// push has its own deadline from the context, so the client has none.
func NewClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSHandshakeTimeout = 10 * time.Second
	tr.MaxIdleConnsPerHost = 4
	return &http.Client{Transport: tr, CheckRedirect: notify.RefuseRedirects}
}

// sharedClient is the client of notifiers given none, made once so that
// they share its connections.
var sharedClient = sync.OnceValue(NewClient)
