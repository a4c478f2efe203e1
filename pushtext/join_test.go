package pushtext

import (
	"strings"
	"testing"
)

// TestJoinSaysHowManyMore: a joined list too long for its limit keeps the
// texts that fit whole and counts the rest, never cutting one mid-list.
func TestJoinSaysHowManyMore(t *testing.T) {
	texts := func(bodies ...string) []Text {
		var ts []Text
		for _, b := range bodies {
			ts = append(ts, Text{Body: b, Subject: strings.ToLower(b)})
		}
		return ts
	}
	for _, tc := range []struct {
		name                  string
		ts                    []Text
		maxBody, maxSubject   int
		wantBody, wantSubject string
	}{
		{"fits", texts("AAAA", "BBBB"), 10, 11, "AAAA; BBBB", "aaaa + bbbb"},
		{"no limit", texts("AAAA", "BBBB", "CCCC"), 0, 0, "AAAA; BBBB; CCCC", "aaaa + bbbb + cccc"},
		// "AAAA; BBBB; and 1 more" is 22 bytes, the whole list 24.
		{"one left out", texts("AAAA", "BBBB", "CCCCCCCCCCCC"), 22, 19, "AAAA; BBBB; and 1 more", "aaaa + 2 more"},
		{"room for the count, not the next text", texts("AAAA", "BBBB", "CCCC", "DDDD"), 21, 13, "AAAA; and 3 more", "aaaa + 3 more"},
		{"the count grows shorter as texts are kept", texts("A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"), 20, 0, "A; B; C; and 8 more", "a + b + c + d + e + f + g + h + i + j + k"},
		{"the first alone too long", texts(strings.Repeat("X", 30), "BBBB"), 20, 0, strings.Repeat("X", 5) + "…; and 1 more", strings.Repeat("x", 30) + " + bbbb"},
		{"one text is the client's to cut", texts(strings.Repeat("X", 30)), 20, 10, strings.Repeat("X", 30), strings.Repeat("x", 30)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Join(tc.ts, tc.maxBody, tc.maxSubject)
			if got.Body != tc.wantBody || got.Subject != tc.wantSubject {
				t.Errorf("Join\n got %q / %q\nwant %q / %q", got.Body, got.Subject, tc.wantBody, tc.wantSubject)
			}
			if tc.maxBody > 0 && len(tc.ts) > 1 && len(got.Body) > tc.maxBody {
				t.Errorf("body of %d bytes, over %d", len(got.Body), tc.maxBody)
			}
		})
	}
}
