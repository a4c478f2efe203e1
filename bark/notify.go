// Package bark is lavender's Bark client, on its own: the targets (URL
// templates in *.bark.env files), Bark's parameters and escaping, end-to-end
// encryption, sending, and the classes of failure, in the shape of
// Alertmanager's notifiers (New, Notify (retry, err)). It knows nothing of
// Alertmanager, the watchdog, phases or the run log.
//
// Device keys live in the templates. They are sent to Bark and nowhere
// else: targets print as "file:line", failures as a short class ("timeout",
// "HTTP 500"), and any library error is redacted before anyone logs it.
package bark

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/version"

	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/notify"
)

// maxResponseBytes bounds how much of Bark's answer is read; its JSON is
// well under 1 KiB.
const maxResponseBytes = 64 << 10

// escapeMessage percent-encodes everything but RFC 3986's unreserved
// characters (A-Z a-z 0-9 - . _ ~). Bark routes on the raw path, so a raw
// "/" would split the push into title and body, and it query-unescapes the
// segments, so a raw "+" would become a space: neither url.PathEscape nor
// url.QueryEscape is right on its own.
func escapeMessage(msg string) string {
	n := 0
	for i := 0; i < len(msg); i++ {
		if !unreserved(msg[i]) {
			n++
		}
	}
	if n == 0 {
		return msg
	}
	const hex = "0123456789ABCDEF"
	buf := make([]byte, 0, len(msg)+2*n)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if unreserved(c) {
			buf = append(buf, c)
			continue
		}
		buf = append(buf, '%', hex[c>>4], hex[c&15])
	}
	return string(buf)
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// MaxMessageBytes bounds a push's text, "…" included. Bark puts the
// message in the request path; percent-encoding can triple it, and
// bark-server (fasthttp) rejects a request line and headers over its 4 KiB
// read buffer. 512 bytes encode to at most 1.5 KiB, which leaves room for
// the template, and is still far more than a lock screen shows (Apple caps
// the whole push payload at 4 KiB).
const MaxMessageBytes = 512

// Clip is the text a push carries for s: sanitized (textsafe.Sanitize) and
// cut to MaxMessageBytes with "…". Notify clips every message; a caller
// that records what it pushed clips it the same way first.
func Clip(s string) string { return textsafe.Truncate(textsafe.Sanitize(s), MaxMessageBytes) }

// Push is one push to a target: the message and the Bark parameters
// lavender adds, each only where the template does not set it itself. A
// level the template sets itself wins over the push's.
type Push = notify.Message

// Bark's levels, from silent to loudest (notify's names are Bark's).
const (
	LevelPassive       = notify.LevelPassive
	LevelActive        = notify.LevelActive
	LevelTimeSensitive = notify.LevelTimeSensitive
	LevelCritical      = notify.LevelCritical
)

// Levels are Bark's levels, from silent to loudest.
var Levels = notify.Levels

// levelOr is level, or LevelPassive when it is "".
func levelOr(level string) string { return notify.LevelOr(level) }

// params are the Bark parameters p adds to a template, in the order they
// are appended.
func params(p Push) []queryParam {
	var ps []queryParam
	add := func(k, v string) {
		if v != "" {
			ps = append(ps, queryParam{k, v})
		}
	}
	add("id", p.ID)
	if p.Delete {
		add("delete", "1")
		return ps // a delete is a background push: nothing to show
	}
	add("group", p.Group)
	add("url", p.URL)
	return ps
}

// newRequest builds the HTTP request of p to t. Its URL holds the device
// key: it goes to the HTTP client and nowhere else. A clear push is a GET
// with the message in the template's $0; an encrypted push POSTs ciphertext
// and iv in a form, and its URL holds nothing of the message; a delete
// holds nothing of it either, in either mode.
func (t Target) newRequest(ctx context.Context, p Push) (*http.Request, *PushError) {
	if p.Delete {
		if t.enc != nil {
			return t.newGET(ctx, t.shape.deleteURL(p))
		}
		return t.newGET(ctx, fillMessage(appendMissingParams(t.tmpl, params(p)...), encryptedPathBody))
	}
	if t.enc == nil {
		base := t.tmpl
		if level := levelOr(p.Level); level != LevelPassive && !t.ownLevel {
			base = appendMissingParams(t.unleveled, queryParam{"level", level})
		}
		tmpl := appendMissingParams(base, params(p)...)
		return t.newGET(ctx, fillMessage(tmpl, p.Text))
	}
	reqURL, form, err := t.enc.encryptedRequest(t.shape, pushParams{Body: p.Text, Group: p.Group, URL: p.URL, ID: p.ID, Level: levelOr(p.Level)})
	if err != nil {
		// encrypt's errors name the random source or the JSON, never the key.
		return nil, &PushError{Class: "encryption", Detail: t.scrub(err.Error())}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, reqURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, &PushError{Class: "invalid URL", Detail: t.scrub(redact(err).Error())}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req, nil
}

// fillMessage puts msg, escaped, in the template's place for it.
func fillMessage(tmpl, msg string) string {
	return strings.ReplaceAll(tmpl, Placeholder, escapeMessage(msg))
}

func (t Target) newGET(ctx context.Context, u string) (*http.Request, *PushError) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &PushError{Class: "invalid URL", Detail: t.scrub(redact(err).Error())}
	}
	return req, nil
}

// PushError is a failed push, reduced to a short class such as "timeout"
// or "HTTP 500". It never holds the URL.
type PushError = notify.Error

// Notifier pushes to one target, in the manner of Alertmanager's
// notifiers: its template was checked once, when the target was loaded,
// every message is clipped (Clip) and every failure is a short class with
// the device key redacted.
type Notifier struct {
	target    Target
	client    *http.Client
	userAgent string
}

// New returns the notifier of t. client sends the pushes (nil: a shared
// client that honours the proxy environment); a copy of it that refuses
// redirects is used, since the URL holds the device key. Each push's
// deadline comes from its context. userAgent "" is "lavender/<version>".
func New(t Target, client *http.Client, userAgent string) *Notifier {
	if userAgent == "" {
		userAgent = "lavender/" + version.Version
	}
	if client == nil {
		client = sharedClient()
	} else {
		hc := *client
		hc.CheckRedirect = refuseRedirects
		client = &hc
	}
	return &Notifier{target: t, client: client, userAgent: userAgent}
}

// Target is the notifier's target.
func (n *Notifier) Target() Target { return n.target }

// Name is the target's file:line.
func (n *Notifier) Name() string { return n.target.Name() }

// String, GoString, Format and LogValue print the target's name only: the
// notifier holds its device key.
func (n *Notifier) String() string { return n.Name() }

// GoString implements fmt.GoStringer.
func (n *Notifier) GoString() string { return "bark.Notifier(" + n.Name() + ")" }

// Format implements fmt.Formatter, so that no verb reaches the fields.
func (n *Notifier) Format(f fmt.State, verb rune) { textsafe.FormatAs(f, verb, n.Name(), n.GoString()) }

// LogValue implements slog.LogValuer.
func (n *Notifier) LogValue() slog.Value { return slog.StringValue(n.Name()) }

// Channel is "bark".
func (n *Notifier) Channel() string { return ChannelName }

// Identity is the target's secret-free identity, a hash of its template.
func (n *Notifier) Identity() string { return n.target.Identity() }

// Phone is whose phone the target reaches: the storm budget's key.
func (n *Notifier) Phone() string { return n.target.Phone() }

var _ notify.Notifier = (*Notifier)(nil)

// ChannelName names Bark's channel in logs, metrics and pages.
const ChannelName = "bark"

// Notify pushes p once. err is nil when Bark accepted the push, else a
// *PushError; retry says whether the failure may pass on a later try (a
// 5xx, 408, 429, a timeout or a network error).
func (n *Notifier) Notify(ctx context.Context, p Push) (retry bool, err error) {
	if pe := n.send(ctx, p); pe != nil {
		return pe.Retryable, pe
	}
	return false, nil
}

// send pushes p once. It returns nil when Bark accepted the push: a 2xx
// whose body is Bark's JSON with code 200. A redirect is never followed
// (the client refuses them): the URL holds the device key.
func (n *Notifier) send(ctx context.Context, p Push) *PushError {
	t, client, userAgent := n.target, n.client, n.userAgent
	p.Text = Clip(p.Text)
	req, perr := t.newRequest(ctx, p)
	if perr != nil {
		return perr
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return t.Classify(ctx, err)
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes)) // let the connection be reused
	var reply struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	}
	isJSON := json.Unmarshal(body, &reply) == nil && reply.Code != nil
	detail := ""
	if isJSON {
		// Scrubbed before it is cut, so that no cut-off key escapes.
		detail = textsafe.Truncate(t.scrub(reply.Message), 200)
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		// A configuration error, not a passing one: Bark itself never
		// redirects a push.
		saw := "HTTP " + strconv.Itoa(resp.StatusCode)
		if loc, err := resp.Location(); err == nil {
			saw += " to " + loc.Scheme + "://" + loc.Host
		}
		return &PushError{Class: "redirect", Saw: t.scrub(saw)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &PushError{
			Class:     "HTTP " + strconv.Itoa(resp.StatusCode),
			Retryable: retryableStatus(resp.StatusCode),
			Detail:    detail,
		}
	}
	if readErr != nil {
		// A 2xx whose body broke off: Bark most likely queued the push, but
		// saying so would not be honest.
		pe := t.Classify(ctx, readErr)
		pe.Class = "reading answer: " + pe.Class
		return pe
	}
	if !isJSON {
		// bark-server answers its own JSON to every push; a plain "ok" is
		// its GET / (the template lost the key's path), anything else is
		// not Bark at all. Nothing was pushed, and a retry will not help.
		saw := fmt.Sprintf("HTTP %d, %s, body %q", resp.StatusCode, contentType(resp), textsafe.Truncate(textsafe.Sanitize(t.scrub(string(body))), 40))
		return &PushError{Class: "not-bark", Saw: saw, Detail: saw}
	}
	if *reply.Code != http.StatusOK {
		return &PushError{
			Class:     "bark code " + strconv.Itoa(*reply.Code),
			Retryable: retryableStatus(*reply.Code),
			Detail:    detail,
		}
	}
	return nil
}

func contentType(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		return "no Content-Type"
	}
	return textsafe.Truncate(textsafe.Sanitize(ct), 40)
}

func retryableStatus(code int) bool { return notify.RetryableStatus(code) }

// Classify turns a transport error of a push to t into a short class, its
// detail redacted and scrubbed of the template's secrets.
func (t Target) Classify(ctx context.Context, err error) *PushError {
	return notify.Classify(ctx, err, t.scrub)
}

func redact(err error) error { return notify.Redact(err) }

// scrub removes anything that looks like a part of the template from s, a
// second line of defence for text that came from the server or a library.
func (t Target) scrub(s string) string {
	for _, p := range t.secrets {
		s = strings.ReplaceAll(s, p, redacted)
	}
	return scrubAPNs(s)
}

// NewClient honours the usual proxy variables and refuses redirects; each
// push has its own deadline from the context, so the client has none.
func NewClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSHandshakeTimeout = 10 * time.Second
	tr.MaxIdleConnsPerHost = 4
	return &http.Client{Transport: tr, CheckRedirect: refuseRedirects}
}

// sharedClient is the client of notifiers given none, made once so that
// they share its connections.
var sharedClient = sync.OnceValue(NewClient)

// refuseRedirects hands the 3xx back to send instead of following it: a
// followed redirect would send the device key, in the path and in the
// Referer, to whatever host the Location names.
var refuseRedirects = notify.RefuseRedirects

// Encryption is the target's end-to-end encryption ("aes-256-gcm"), or ""
// when its pushes go in clear.
func (n *Notifier) Encryption() string { return n.target.Encryption() }
