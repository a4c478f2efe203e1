// Package textsafe makes text from anywhere (an alert's annotations, a
// phase name, a kernel's process name, a server's answer) safe to show on a
// phone, in a log line or on the status page: valid UTF-8, no control
// characters, none of the invisible characters that can make a text read
// as something else, and a bounded length cut with "…". The push texts,
// the Bark client and the bridge share it; it imports nothing of ours.
package textsafe

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const ellipsis = "…"

// Sanitize makes text safe to push: valid UTF-8, no control characters
// other than newlines (which Bark shows as line breaks; others become
// spaces), and no Hidden characters. Every text that reaches a push, the
// status page or the webhook's answer passes through here.
func Sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return ' '
		case Hidden(r):
			return -1
		}
		return r
	}, s))
}

// Hidden reports whether r is an invisible format character (Unicode
// category Cf: bidi overrides and isolates, direction marks, zero-width
// characters), which could make an alert name read as something else.
func Hidden(r rune) bool { return r >= 0x80 && unicode.Is(unicode.Cf, r) }

// Truncate cuts s to at most max bytes, "…" included, on a rune boundary.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
