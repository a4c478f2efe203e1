package pushtext

import (
	"slices"
	"testing"

	"github.com/lavender-ml/lavender/watchdog"
)

func TestTags(t *testing.T) {
	for _, tc := range []struct {
		rule     watchdog.RuleName
		resolved bool
		want     []string
	}{
		{watchdog.RuleSwap, false, []string{"warning", "swap"}},
		{watchdog.RuleOOM, false, []string{"skull", "oom"}},
		{watchdog.RuleFailed, false, []string{"x", "failed"}},
		{watchdog.RuleSwap, true, []string{"white_check_mark", "swap"}},
		{"mystery", false, []string{"warning", "mystery"}},
		{"", false, []string{"warning"}},
	} {
		if got := Tags(tc.rule, tc.resolved); !slices.Equal(got, tc.want) {
			t.Errorf("Tags(%q, %v) = %q, want %q", tc.rule, tc.resolved, got, tc.want)
		}
	}
}

// TestEveryRuleIsTagged: every kind of watchdog push has a tag of its own
// rather than the default.
func TestEveryRuleIsTagged(t *testing.T) {
	for _, event := range Events {
		if _, ok := ruleTags[event]; !ok {
			t.Errorf("no tag for the watchdog's %q pushes", event)
		}
	}
}
