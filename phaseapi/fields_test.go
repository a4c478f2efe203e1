package phaseapi

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestLossJSON(t *testing.T) {
	for _, tc := range []struct {
		loss Loss
		json string
	}{
		{2.5, `2.5`}, {Loss(math.NaN()), `"NaN"`}, {Loss(math.Inf(1)), `"Infinity"`}, {Loss(math.Inf(-1)), `"-Infinity"`},
	} {
		data, err := json.Marshal(tc.loss)
		if err != nil || string(data) != tc.json {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tc.loss, data, err, tc.json)
		}
		var back Loss
		if err := json.Unmarshal(data, &back); err != nil || back.String() != tc.loss.String() {
			t.Errorf("Unmarshal(%s) = %v, %v", data, back, err)
		}
	}
	var l Loss
	if err := json.Unmarshal([]byte(`"nan"`), &l); err == nil || !strings.Contains(err.Error(), "loss must be") {
		t.Errorf(`"nan": %v`, err)
	}
}

// TestCleanReason: white space folds, controls, invalid UTF-8 and hidden
// characters become U+FFFD, long reasons are cut.
func TestCleanReason(t *testing.T) {
	for in, want := range map[string]string{
		"  RuntimeError: x\n\tat y  ": "RuntimeError: x at y",
		"a\u200bb\u202ec\x00d":        "a\uFFFDb\uFFFDc\uFFFDd",
		// The joiners and a flag's tags are kept, as in a push: a
		// reason reads the same in the run log and on the phone.
		"OOM in 👩🏽\u200d💻 loop": "OOM in 👩🏽\u200d💻 loop",
		"می\u200cخواهم":         "می\u200cخواهم",
		"🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F data": "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F data",
		"stray \U000E0067 tag":   "stray \uFFFD tag",
		"bad \xff byte":          "bad \uFFFD byte",
		strings.Repeat("x", 201): strings.Repeat("x", 199) + "…",
		strings.Repeat("é", 200): strings.Repeat("é", 200),
	} {
		if got := CleanReason(in); got != want {
			t.Errorf("CleanReason(%q) = %q, want %q", in, got, want)
		}
	}
}
