// Package textsafe makes text from anywhere (an alert's annotations, a
// phase name, a kernel's process name, a server's answer) safe to show on a
// phone, in a log line or on the status page: valid UTF-8, no control
// characters, none of the invisible characters that can make a text read
// as something else, and a bounded length cut with "…" where no emoji is
// split. The push texts, the Bark client and the bridge share it; it
// imports nothing of ours.
//
// What is dropped and what is kept:
//   - dropped: the bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E,
//     U+2066–U+2069), which reorder what follows ("exe.gnp" shown as
//     "png.exe"); and every other invisible format character (Unicode
//     category Cf) that has no place in a push: zero-width space U+200B,
//     word joiner U+2060, the invisible operators, soft hyphen U+00AD, the
//     BOM U+FEFF, the interlinear annotation marks, U+180E;
//   - kept: the zero-width joiner U+200D, which joins emoji into one (👨‍👩‍👧,
//     👩🏽‍💻) and shapes Arabic and Indic scripts, and the zero-width
//     non-joiner U+200C, which Persian and Indic spelling need: neither
//     reorders text nor hides a character; the variation selectors
//     (U+FE0E, U+FE0F) and skin-tone modifiers, which are not format
//     characters at all; and the tag characters (U+E0020–U+E007F) only
//     where they spell a flag: after 🏴 (U+1F3F4) and ending in the cancel
//     tag U+E007F, as in 🏴󠁧󠁢󠁳󠁣󠁴󠁿. Anywhere else a tag character is invisible text
//     and is dropped.
package textsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

const ellipsis = "…"

const (
	zwj        = '\u200D'
	zwnj       = '\u200C'
	blackFlag  = '\U0001F3F4'
	tagFirst   = '\U000E0020'
	tagCancel  = '\U000E007F'
	skinFirst  = '\U0001F3FB'
	skinLast   = '\U0001F3FF'
	vsText     = '\uFE0E'
	vsEmoji    = '\uFE0F'
	maxTagRuns = 32 // a subdivision flag has 5–6 tags; more is not a flag
)

// Sanitize makes text safe to push: valid UTF-8, no control characters
// other than newlines (which Bark shows as line breaks; others become
// spaces), and none of the hidden characters the package doc lists.
// Every text that reaches a push, the status page or the webhook's answer
// passes through here.
func Sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r != '\n' && (unicode.IsControl(r) || r == '\u2028' || r == '\u2029') {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(StripHidden(s))
}

// StripHidden drops the hidden characters the package doc lists and keeps
// everything else as it is: what a log line may show of a text.
func StripHidden(s string) string { return ReplaceHidden(s, "") }

// ReplaceHidden puts mark in the place of each hidden character the
// package doc lists, and keeps everything else as it is (the joiners, a
// flag's tags): for a record that shows where something was taken out.
func ReplaceHidden(s, mark string) string {
	if !strings.ContainsFunc(s, mayHide) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == blackFlag {
			if end := flagEnd(s, i+n); end > 0 {
				b.WriteString(s[i:end])
				i = end
				continue
			}
		}
		if Hidden(r) {
			b.WriteString(mark)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// flagEnd is the end of a tag sequence starting at i and ending in the
// cancel tag (the rest of a subdivision flag after its 🏴), or 0.
func flagEnd(s string, i int) int {
	for k := 0; k < maxTagRuns && i < len(s); k++ {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == tagCancel:
			if k == 0 {
				return 0
			}
			return i + n
		case r >= tagFirst && r < tagCancel:
			i += n
		default:
			return 0
		}
	}
	return 0
}

// Hidden reports whether r, on its own, is an invisible character that can
// make a text read as something else: a bidi control, a tag character
// (kept only inside a flag, which StripHidden sees), or any other format
// character (Cf) except the joiners the package doc keeps.
func Hidden(r rune) bool {
	if r < 0x80 || r == zwj || r == zwnj {
		return false
	}
	return unicode.Is(unicode.Cf, r)
}

// mayHide is Hidden, cheaply true for what StripHidden must look at.
func mayHide(r rune) bool { return r >= 0x80 && unicode.Is(unicode.Cf, r) && r != zwj && r != zwnj }

// Truncate cuts s to at most max bytes, "…" included, on a rune boundary
// that splits no emoji: a cut inside a joined emoji (👨‍👩‍👧), a flag, or
// before a modifier or variation selector drops the whole emoji instead.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	for cut > 0 {
		next, _ := utf8.DecodeRuneInString(s[cut:])
		prev, n := utf8.DecodeLastRuneInString(s[:cut])
		if !extends(next) && prev != zwj {
			break
		}
		cut -= n
	}
	return s[:cut] + ellipsis
}

// extends reports whether r belongs to the character before it: a joiner,
// a variation selector, a skin-tone modifier, a tag, or a combining mark.
func extends(r rune) bool {
	switch {
	case r == zwj, r == vsText, r == vsEmoji:
		return true
	case r >= skinFirst && r <= skinLast, r >= tagFirst && r <= tagCancel:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me)
}

// FormatAs is the Format method of a type that holds a secret (a device
// key, a token, a password): every fmt verb prints name, and %#v prints
// goString, so that no verb (%d, %x, %+v) reaches the fields.
func FormatAs(f fmt.State, verb rune, name, goString string) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, goString)
		return
	}
	_, _ = io.WriteString(f, name)
}
