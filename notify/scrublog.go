package notify

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lavender-ml/lavender/internal/textsafe"
)

// NewScrubHandler wraps h so that every message and attribute it logs is
// cleaned: scrub removes the secrets (each channel's Scrub, chained), and
// invisible format characters are dropped. lavender's logger is built on
// it, and the standard log package and every http.Server's ErrorLog write
// through that logger.
func NewScrubHandler(h slog.Handler, scrub func(string) string) slog.Handler {
	return scrubHandler{next: h, scrub: scrub}
}

type scrubHandler struct {
	next  slog.Handler
	scrub func(string) string
}

// clean is what a log line may show of a text: scrubbed, and without the
// invisible format characters (bidi overrides and the like) that
// textsafe.Sanitize also drops from pushes.
func (s scrubHandler) clean(text string) string { return textsafe.StripHidden(s.scrub(text)) }

func (s scrubHandler) Enabled(ctx context.Context, l slog.Level) bool { return s.next.Enabled(ctx, l) }

func (s scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, s.clean(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(s.cleanAttr(a))
		return true
	})
	return s.next.Handle(ctx, out)
}

func (s scrubHandler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = s.cleanAttr(a)
	}
	return scrubHandler{next: s.next.WithAttrs(clean), scrub: s.scrub}
}

func (s scrubHandler) WithGroup(name string) slog.Handler {
	return scrubHandler{next: s.next.WithGroup(s.clean(name)), scrub: s.scrub}
}

func (s scrubHandler) cleanAttr(a slog.Attr) slog.Attr {
	a.Key = s.clean(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(s.clean(v.String()))
	case slog.KindGroup:
		as := v.Group()
		clean := make([]slog.Attr, len(as))
		for i, g := range as {
			clean[i] = s.cleanAttr(g)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		// An error or any other value is printed by the handler; print it
		// here instead when that text needs cleaning.
		text := fmt.Sprint(v.Any())
		if c := s.clean(text); c != text {
			a.Value = slog.StringValue(c)
		} else {
			a.Value = v
		}
	default:
		a.Value = v
	}
	return a
}
