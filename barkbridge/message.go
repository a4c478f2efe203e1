package barkbridge

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/alertmanager/template"

	"lavender/runlog"
)

const (
	// DefaultPrefix starts every message, as in the predecessor.
	DefaultPrefix = "[lavender-2]"

	// MaxMessageBytes bounds a push's text, "…" included. Bark puts the
	// message in the request path; percent-encoding can triple it, and
	// bark-server (fasthttp) rejects a request line and headers over its
	// 4 KiB read buffer. 512 bytes encode to at most 1.5 KiB, which leaves
	// room for the template, and is still far more than a lock screen shows
	// (Apple caps the whole push payload at 4 KiB).
	MaxMessageBytes = 512

	// maxSubjectBytes keeps the run-log line's "sent ok=N fail=M" visible
	// under runlog's 80-byte cap however long an alert name is.
	maxSubjectBytes = 40

	annotationRatio = "swap_used_ratio"
	annotationUsed  = "swap_used_bytes"
	annotationTotal = "swap_total_bytes"
	annotationSumm  = "summary"
)

// SwapFigures describe swap use. TotalBytes == 0 means the byte figures are
// unknown and the message leaves them out.
type SwapFigures struct {
	Ratio                 float64 // used/total on a 0–1 scale
	UsedBytes, TotalBytes uint64
}

// formatSwap is the one swap message, shared by the webhook and the
// watchdog: "[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening".
func formatSwap(prefix string, s SwapFigures) string {
	return clipMessage(withPrefix(prefix, swapText(s)+" — consider intervening"))
}

// formatSwapResolved is formatSwap's counterpart once the alert resolved,
// after lasted: "resolved: swap 31% full (9.9/32.0 GB) after 42m". An
// unknown duration (0) leaves the "after" out.
func formatSwapResolved(prefix string, s SwapFigures, lasted time.Duration) string {
	return clipMessage(withPrefix(prefix, "resolved: "+swapText(s)+after(lasted)))
}

// swapText is "swap 54% full (16.3/32.0 GB)". The percent is rounded; a GB
// is 2^30 bytes, shown with one decimal.
func swapText(s SwapFigures) string {
	text := "swap " + swapPercent(s) + " full"
	if s.bytesKnown() {
		const gib = 1 << 30
		text += fmt.Sprintf(" (%.1f/%.1f GB)", float64(s.UsedBytes)/gib, float64(s.TotalBytes)/gib)
	}
	return text
}

// swapSubject names a swap push in the run log: "swap 54%".
func swapSubject(s SwapFigures) string { return "swap " + swapPercent(s) }

func swapPercent(s SwapFigures) string {
	r := s.Ratio
	if !usableRatio(r) && s.bytesKnown() {
		r = float64(s.UsedBytes) / float64(s.TotalBytes)
	}
	if !usableRatio(r) {
		return "?%"
	}
	return strconv.Itoa(int(math.Round(r*100))) + "%"
}

func (s SwapFigures) bytesKnown() bool { return s.TotalBytes > 0 && s.UsedBytes <= s.TotalBytes }

func usableRatio(r float64) bool { return !math.IsNaN(r) && r >= 0 && r <= 1 }

// swapFromAnnotations reads the figures alerts.yml puts on the swap alert.
// Values come from Prometheus templates, so "1.7501e+10" and "54%" are
// accepted as well as plain numbers, but not hex floats, "inf" or "nan".
// ok is false when no usable ratio can be had, from the ratio annotation or
// from the two byte counts.
func swapFromAnnotations(a template.KV) (SwapFigures, bool) {
	var s SwapFigures
	used, uok := parseBytes(a[annotationUsed])
	total, tok := parseBytes(a[annotationTotal])
	if uok && tok && total > 0 && used <= total {
		s.UsedBytes, s.TotalBytes = used, total
	}
	if r, ok := parseRatio(a[annotationRatio]); ok {
		s.Ratio = r
		return s, true
	}
	if s.bytesKnown() {
		s.Ratio = float64(s.UsedBytes) / float64(s.TotalBytes)
		return s, true
	}
	return s, false
}

func parseRatio(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	scale := 1.0
	if p, ok := strings.CutSuffix(v, "%"); ok {
		v, scale = strings.TrimSpace(p), 100
	}
	f, ok := parseDecimal(v)
	if !ok {
		return 0, false
	}
	f /= scale
	return f, usableRatio(f)
}

func parseBytes(v string) (uint64, bool) {
	f, ok := parseDecimal(strings.TrimSpace(v))
	if !ok || math.IsNaN(f) || f < 0 || f >= 1<<63 {
		return 0, false
	}
	return uint64(math.Round(f)), true
}

// plainDecimal is what Prometheus's templates write: digits, an optional
// fraction and exponent. strconv.ParseFloat alone would also take "0x1p-1"
// (hex), "inf" and "nan", which would push a number nobody wrote.
var plainDecimal = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

func parseDecimal(v string) (float64, bool) {
	if !plainDecimal.MatchString(v) {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

func withPrefix(prefix, text string) string {
	if prefix == "" {
		return text
	}
	return prefix + " " + text
}

// sanitizeMessage makes text safe to push: valid UTF-8, no control
// characters other than newlines (which Bark shows as line breaks), and no
// invisible format characters (Unicode category Cf: bidi overrides and
// isolates, direction marks, zero-width characters), which could make an
// alert name read as something else. Every text that reaches a push, the
// status page or the webhook's answer passes through here.
func sanitizeMessage(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return ' '
		case isFormatChar(r):
			return -1
		}
		return r
	}, s))
}

// clipMessage sanitizes s and bounds it to MaxMessageBytes.
func clipMessage(s string) string { return runlog.Truncate(sanitizeMessage(s), MaxMessageBytes) }

// subject is the short name of a push in the run log: one line, bounded.
func subject(s string) string {
	s = strings.Join(strings.Fields(sanitizeMessage(s)), " ")
	return runlog.Truncate(s, maxSubjectBytes)
}

// runlogLine is the one builder of a push's run-log entry:
// "BARK swap 54% sent ok=1 fail=0".
func runlogLine(subj string, ok, failed int) string {
	return fmt.Sprintf("BARK %s sent ok=%d fail=%d", subj, ok, failed)
}
