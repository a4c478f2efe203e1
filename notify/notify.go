// Package notify is the contract between delivery and the channels that
// reach a phone (Bark, ntfy), in the shape of Alertmanager's notify: one
// Message, the same for every channel, which each channel maps to its own
// fields; the Notifier each channel's package implements; and the Error
// every failed push becomes, a short class that never holds a secret.
//
// A channel's package imports this one and nothing else of lavender's but
// internal/textsafe; delivery imports the channels and this.
package notify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
)

// The levels of a push, from silent to loudest. They are Bark's names;
// other channels map them (ntfy: priorities 2 to 5).
const (
	LevelPassive       = "passive"       // silent, into the list
	LevelActive        = "active"        // sound and banner
	LevelTimeSensitive = "timeSensitive" // breaks through Focus where the user allowed it
	LevelCritical      = "critical"      // ignores mute
)

// Levels are the levels, from silent to loudest.
var Levels = []string{LevelPassive, LevelActive, LevelTimeSensitive, LevelCritical}

// LevelOr is level, or LevelPassive when it is "".
func LevelOr(level string) string {
	if level == "" {
		return LevelPassive
	}
	return level
}

// Message is one push, the same for every channel and target. Each channel
// clips Text to its own limit and leaves out what it cannot carry.
type Message struct {
	Text  string // the whole text, prefix included: "[lavender-2] swap 54% full …"
	Title string // a short title where the channel shows one; "": none
	// ID is the incident's id: a later message with the same id replaces
	// this one on the phone (Bark's id, ntfy's sequence id).
	ID     string
	Group  string // the host the push is about; Bark groups notifications by it
	URL    string // opened when the notification is tapped
	Delete bool   // remove the notification with this ID instead of showing Text
	// Level is the push's urgency, one of Levels; "" is LevelPassive.
	Level string
	// Tags name the kind of event ("swap", "gpu", "resolved"); ntfy shows
	// them as emoji short codes, Bark ignores them.
	Tags []string
	// Resolved says the message ends its incident, so a channel that
	// cannot replace the earlier notification can say which it resolves.
	Resolved bool
}

// Notifier pushes to one target of one channel. Every method is safe for
// concurrent use.
type Notifier interface {
	// Name is what logs, metrics and pages call the target: its file and
	// line ("phone.bark.env:2"), never its secret.
	Name() string
	// Channel is the channel's name: "bark", "ntfy".
	Channel() string
	// Identity is a stable, secret-free key of where the pushes go (a hash
	// of the target): the dedup memory's key, the same across reloads.
	Identity() string
	// Phone is whose phone the target reaches: targets with the same
	// Phone share one storm budget.
	Phone() string
	// Notify pushes m once. err is nil when the service accepted it, else
	// an *Error; retry says whether the failure may pass on a later try.
	Notify(ctx context.Context, m Message) (retry bool, err error)
}

// Error is a failed push, reduced to a short class such as "timeout" or
// "HTTP 500". It never holds a URL, a key or a token.
type Error struct {
	Class     string
	Retryable bool // the failure may pass: a 5xx, 429, timeout or network error
	// Saw says, scrubbed, what came back when it was not what the service
	// answers (a redirect, a page that is not its JSON), for `send --test`.
	Saw string
	// Detail is the redacted underlying error, for debug logs only.
	Detail string
	// Unreachable: the server was not reached at all (refused,
	// unreachable, unknown host, TLS), so the next push would fail alike.
	Unreachable bool
}

func (e *Error) Error() string { return e.Class }

// AsError is err as an *Error; any other error is a retryable
// "network error", its text dropped since it may hold a secret.
func AsError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Class: "network error", Retryable: true}
}

// RetryableStatus follows Alertmanager's receivers: a 5xx may pass, and so
// may 408 and 429, which mean "not now" rather than "never".
func RetryableStatus(code int) bool {
	return code >= 500 || code == 429 || code == 408
}

// Classify turns a transport error of a push into a short class. scrub
// removes the target's secrets from the detail kept for debug logs, after
// the URL in a *url.Error is redacted as Alertmanager's RedactURL does; nil
// scrubs nothing more. A caller that gives up on a push before sending it
// (its context ended) classifies the context's error.
func Classify(ctx context.Context, err error, scrub func(string) string) *Error {
	detail := Redact(err).Error()
	if scrub != nil {
		detail = scrub(detail)
	}
	pe := &Error{Retryable: true, Detail: detail}
	var (
		netErr  net.Error
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
		alert   tls.AlertError
		unknown x509.UnknownAuthorityError
		hostErr x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		pe.Class = "timeout"
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		pe.Class = "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		pe.Class, pe.Unreachable = "connection refused", true
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		pe.Class = "connection reset"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		pe.Class = "connection closed"
	case errors.As(err, &dnsErr):
		pe.Class, pe.Unreachable = "dns", true
		if dnsErr.IsNotFound {
			pe.Class = "unknown host"
		}
	case errors.As(err, &certErr) || errors.As(err, &recErr) || errors.As(err, &alert) ||
		errors.As(err, &unknown) || errors.As(err, &hostErr) || errors.As(err, &invalid) ||
		strings.Contains(err.Error(), "tls: "):
		pe.Class, pe.Unreachable = "tls", true
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		pe.Class, pe.Unreachable = "unreachable", true
	default:
		pe.Class = "network error"
	}
	return pe
}

// Redact replaces the URL in a *url.Error, which Go prints in full and
// which may hold a key or a token.
func Redact(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	if err == error(ue) {
		cp := *ue
		cp.URL = "<redacted>"
		return &cp
	}
	if ue.URL == "" {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), ue.URL, "<redacted>"))
}

// RefuseRedirects is a CheckRedirect that hands a 3xx back instead of
// following it: a request carrying a secret (in its URL or its headers)
// never goes to a host a Location names.
func RefuseRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// PhoneRule says what a phone's name may be, for the errors of the
// channels' files.
const PhoneRule = "must be 1 to 64 letters, digits, '_', '.' or '-'"

// ValidPhone reports whether name can name a phone (PhoneRule), so it reads
// the same in a log, a metric and a summary.
func ValidPhone(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// Phone is the Notifier.Phone of targets a user named as one phone
// (Bark's PHONE= line, ntfy's phone= option), apart from any file:line.
func Phone(name string) string { return "phone " + name }
