package textsafe

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	family     = "\U0001F468\u200D\U0001F469\u200D\U0001F467"                             // 👨‍👩‍👧
	coder      = "\U0001F469\U0001F3FD\u200D\U0001F4BB"                                   // 👩🏽‍💻: skin tone, then ZWJ
	scotland   = "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F" // 🏴󠁧󠁢󠁳󠁣󠁴󠁿
	heart      = "\u2764\uFE0F"                                                           // ❤️: emoji presentation
	thumbsDark = "\U0001F44D\U0001F3FF"                                                   // 👍🏿
	persian    = "\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645"                       // می‌خواهم: ZWNJ is spelling
)

// TestSanitizeKeepsEmojiAndScripts: the joiners, selectors, modifiers and
// flag tags that make one emoji (or spell a word) reach the phone whole.
func TestSanitizeKeepsEmojiAndScripts(t *testing.T) {
	for _, s := range []string{family, coder, scotland, heart, thumbsDark, persian, "GB " + scotland + " and 🇬🇧", "a\nb"} {
		if got := Sanitize(s); got != s {
			t.Errorf("Sanitize(%q) = %q, want it unchanged", s, got)
		}
		if got := StripHidden(s); got != s {
			t.Errorf("StripHidden(%q) = %q", s, got)
		}
	}
}

// TestSanitizeDropsWhatHides: bidi controls, zero-width spaces and the
// like, and tag characters outside a flag (invisible text), are dropped.
func TestSanitizeDropsWhatHides(t *testing.T) {
	tests := []struct{ in, want string }{
		{"exe.\u202Egnp", "exe.gnp"},
		{"a\u2066b\u2069c\u200E\u200F\u061Cd", "abcd"},
		{"Disk\u200BFull\u2060\uFEFF\u00AD", "DiskFull"},
		{"ok\U000E0069\U000E0067\U000E006E\U000E006F\U000E0072\U000E0065", "ok"}, // tag text without a flag
		{"\U0001F3F4\U000E0067\U000E0062", "\U0001F3F4"},                         // a flag that never ends
		{"\U0001F3F4\U000E007F", "\U0001F3F4"},                                   // a cancel tag alone
		{"a\x00b\tc\nd\xffe", "a b c\nd\uFFFDe"},
		{"  x  ", "x"},
	}
	for _, tt := range tests {
		if got := Sanitize(tt.in); got != tt.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestTruncateSplitsNoEmoji: a cut that would fall inside a joined emoji,
// a flag or before a modifier drops the emoji whole; the result stays
// within max and valid UTF-8.
func TestTruncateSplitsNoEmoji(t *testing.T) {
	for _, emoji := range []string{family, coder, scotland, heart, thumbsDark} {
		s := "ab " + emoji + " cd"
		for max := len("ab …"); max < len(s); max++ {
			got := Truncate(s, max)
			if len(got) > max || !utf8.ValidString(got) || !strings.HasSuffix(got, ellipsis) {
				t.Fatalf("Truncate(%q, %d) = %q", s, max, got)
			}
			body := strings.TrimSuffix(got, ellipsis)
			if !strings.HasPrefix(s, body) {
				t.Fatalf("Truncate(%q, %d) = %q is not a prefix", s, max, got)
			}
			if rest := strings.TrimPrefix(body, "ab "); rest != "" && !strings.HasPrefix(rest, emoji) {
				t.Errorf("Truncate(%q, %d) = %q splits the emoji", s, max, got)
			}
		}
	}
	if got := Truncate("abcdef", 6); got != "abcdef" {
		t.Errorf("at the bound: %q", got)
	}
	if got := Truncate("abcdefg", 6); got != "abc…" {
		t.Errorf("ASCII: %q", got)
	}
}

type secretHolder struct{ key string }

func (s secretHolder) Format(f fmt.State, verb rune) {
	FormatAs(f, verb, "phone.bark.env:1", "bark.Target(phone.bark.env:1)")
}

func TestFormatAs(t *testing.T) {
	v := secretHolder{key: "SECRETKEY123"}
	for _, verb := range []string{"%v", "%+v", "%s", "%q", "%d", "%x", "%X", "%10v", "%#v"} {
		want := "phone.bark.env:1"
		if verb == "%#v" {
			want = "bark.Target(phone.bark.env:1)"
		}
		if got := fmt.Sprintf(verb, v); got != want {
			t.Errorf("%s = %q, want %q", verb, got, want)
		}
	}
	if got := fmt.Sprint([]secretHolder{v}, map[string]secretHolder{"a": v}); strings.Contains(got, "SECRETKEY123") {
		t.Errorf("in a slice and a map: %s", got)
	}
}
