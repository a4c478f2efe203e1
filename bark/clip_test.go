package bark

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClipMessage(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	got := Clip(long)
	if len(got) > MaxMessageBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("clipped to %d bytes, valid %v: ...%q", len(got), utf8.ValidString(got), got[len(got)-8:])
	}
	if got := Clip("a\x00b\tc\nd\xffe"); got != "a b c\nd\uFFFDe" {
		t.Errorf("sanitize = %q", got)
	}
	if got := Clip(strings.Repeat("a", MaxMessageBytes)); len(got) != MaxMessageBytes || strings.Contains(got, "…") {
		t.Errorf("a message at the bound was cut")
	}
}
