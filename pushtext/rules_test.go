package pushtext

import (
	"slices"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/watchdog"
)

// everyRule builds every rule the watchdog has, each turned on.
func everyRule(t *testing.T) []watchdog.Rule {
	t.Helper()
	rules, err := watchdog.NewRules(watchdog.DefaultRuleFlags)
	if err != nil {
		t.Fatal(err)
	}
	phase, err := watchdog.NewPhaseRules(watchdog.PhaseConfig{
		Notify:     []string{string(watchdog.RuleFailed), string(watchdog.RuleStalled), string(watchdog.RuleLoss), string(watchdog.RuleDone)},
		StallAfter: watchdog.DefaultStallAfter,
	})
	if err != nil {
		t.Fatal(err)
	}
	disk, err := watchdog.NewDiskRule(watchdog.DiskConfig{MinFree: watchdog.DefaultMinFree()})
	if err != nil {
		t.Fatal(err)
	}
	return append(append(rules, phase...), disk)
}

// TestEveryRuleIsWorded: each rule the watchdog builds has its line in
// wordings, once, and no line is left for a rule that is gone; so
// --bark.level takes exactly the rules there are.
func TestEveryRuleIsWorded(t *testing.T) {
	var built []watchdog.RuleName
	for _, r := range everyRule(t) {
		built = append(built, r.Name())
		if _, ok := wordingOf(r.Name()); !ok {
			t.Errorf("rule %q has no line in wordings", r.Name())
		}
	}
	seen := map[watchdog.RuleName]bool{}
	for _, w := range wordings {
		if seen[w.rule] {
			t.Errorf("rule %q has two lines in wordings", w.rule)
		}
		seen[w.rule] = true
		if !slices.Contains(built, w.rule) {
			t.Errorf("wordings has a line for %q, which no rule is named", w.rule)
		}
		if !strings.Contains(w.summary, " ") {
			t.Errorf("%q's summary name %q has no space: an alert name could pass for it", w.rule, w.summary)
		}
	}
	if got, want := EventList(), "swap, pressure, oom, failed, stalled, done, loss, gpu, gpu-lost, gpu-ecc, gpu-remap, gpu-hang, gpu-idle, gpu-slowdown, disk, disk-space"; got != want {
		t.Errorf("EventList() = %q, want %q", got, want)
	}
}
