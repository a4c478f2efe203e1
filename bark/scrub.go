package bark

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"

	"lavender/internal/textsafe"
)

// redacted replaces a secret wherever one is found.
const redacted = "<redacted>"

// apnsToken matches an APNs device token in the path bark-server posts to
// (https://api.push.apple.com/3/device/<token>), which it quotes in its 500
// answer. A token is 32 bytes today, hex-encoded; Apple allows longer ones.
var apnsToken = regexp.MustCompile(`/3/device/[0-9A-Fa-f]{64,}`)

// maxKnownSecrets bounds the process-wide list below; a real config has a
// few targets, each with a few secret parts.
const maxKnownSecrets = 4096

// knownSecrets are the secret parts of every target loaded from a file in
// this process. Text that did not pass through a Target's own scrub (the
// standard log package, where net/http quotes what a server sent on an idle
// connection, or any library's error) is scrubbed with them by Scrub and
// ScrubHandler. Targets removed by a reload stay in the list: their keys are
// no less secret for it.
var knownSecrets struct {
	mu       sync.RWMutex
	set      map[string]struct{}
	replacer *strings.Replacer
}

// rememberSecrets adds the targets' secret parts to knownSecrets.
func rememberSecrets(ts []Target) {
	knownSecrets.mu.Lock()
	defer knownSecrets.mu.Unlock()
	if knownSecrets.set == nil {
		knownSecrets.set = make(map[string]struct{})
	}
	n := 0
	for _, t := range ts {
		n += len(t.secrets)
	}
	if len(knownSecrets.set)+n > maxKnownSecrets {
		// Only a fuzzer or a test loads thousands of targets; keep the
		// newest rather than grow without bound.
		clear(knownSecrets.set)
	}
	added := false
	for _, t := range ts {
		for _, s := range t.secrets {
			if _, ok := knownSecrets.set[s]; !ok {
				knownSecrets.set[s] = struct{}{}
				added = true
			}
		}
	}
	if !added && knownSecrets.replacer != nil {
		return
	}
	// Longest first, so a key is replaced whole before a part of it.
	parts := make([]string, 0, len(knownSecrets.set))
	for s := range knownSecrets.set {
		parts = append(parts, s)
	}
	slices.SortFunc(parts, func(a, b string) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	pairs := make([]string, 0, 2*len(parts))
	for _, s := range parts {
		pairs = append(pairs, s, redacted)
	}
	knownSecrets.replacer = strings.NewReplacer(pairs...)
}

// Scrub removes from s every secret part of a target loaded in this process
// and every APNs device token. It is the last line of defence for text
// lavender did not produce itself.
func Scrub(s string) string {
	knownSecrets.mu.RLock()
	r := knownSecrets.replacer
	knownSecrets.mu.RUnlock()
	if r != nil {
		s = r.Replace(s)
	}
	return scrubAPNs(s)
}

func scrubAPNs(s string) string {
	if !strings.Contains(s, "/3/device/") {
		return s
	}
	return apnsToken.ReplaceAllString(s, "/3/device/"+redacted)
}

// cleanLogText is what a log line may show of a text: scrubbed, and without
// the invisible format characters (bidi overrides and the like) that
// textsafe.Sanitize also drops from pushes.
func cleanLogText(s string) string {
	return textsafe.StripHidden(Scrub(s))
}

// NewScrubHandler wraps h so that every message and attribute it logs is
// cleaned: secrets of the loaded targets and APNs device tokens become
// <redacted>, and invisible format characters are dropped. lavender's
// logger is built on it, and the standard log package and every
// http.Server's ErrorLog write through that logger.
func NewScrubHandler(h slog.Handler) slog.Handler { return scrubHandler{h} }

type scrubHandler struct{ next slog.Handler }

func (s scrubHandler) Enabled(ctx context.Context, l slog.Level) bool { return s.next.Enabled(ctx, l) }

func (s scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, cleanLogText(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(cleanAttr(a))
		return true
	})
	return s.next.Handle(ctx, out)
}

func (s scrubHandler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = cleanAttr(a)
	}
	return scrubHandler{s.next.WithAttrs(clean)}
}

func (s scrubHandler) WithGroup(name string) slog.Handler {
	return scrubHandler{s.next.WithGroup(cleanLogText(name))}
}

func cleanAttr(a slog.Attr) slog.Attr {
	a.Key = cleanLogText(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(cleanLogText(v.String()))
	case slog.KindGroup:
		as := v.Group()
		clean := make([]slog.Attr, len(as))
		for i, g := range as {
			clean[i] = cleanAttr(g)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		// An error or any other value is printed by the handler; print it
		// here instead when that text needs cleaning.
		text := fmt.Sprint(v.Any())
		if c := cleanLogText(text); c != text {
			a.Value = slog.StringValue(c)
		} else {
			a.Value = v
		}
	default:
		a.Value = v
	}
	return a
}
