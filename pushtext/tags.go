package pushtext

import "github.com/lavender-ml/lavender/watchdog"

// ruleTags are the tags of each kind of push: emoji short codes, which
// ntfy shows before the title (Bark has no tags). A kind not listed gets
// DefaultTag.
var ruleTags = map[watchdog.RuleName]string{
	watchdog.RuleSwap:        "warning",
	watchdog.RulePressure:    "warning",
	watchdog.RuleOOM:         "skull",
	watchdog.RuleFailed:      "x",
	watchdog.RuleStalled:     "hourglass",
	watchdog.RuleDone:        "white_check_mark",
	watchdog.RuleLoss:        "chart_with_downwards_trend",
	watchdog.RuleGPU:         "rotating_light",
	watchdog.RuleGPULost:     "rotating_light",
	watchdog.RuleGPUECC:      "rotating_light",
	watchdog.RuleGPURemap:    "wrench",
	watchdog.RuleGPUHang:     "hourglass",
	watchdog.RuleGPUIdle:     "zzz",
	watchdog.RuleGPUSlowdown: "thermometer",
	watchdog.RuleDisk:        "rotating_light",
	watchdog.RuleDiskSpace:   "floppy_disk",
}

// DefaultTag is the tag of a push of a kind without its own, an
// Alertmanager alert lavender has no words for included.
const DefaultTag = "warning"

// ResolvedTag is the tag of a push that ends its incident.
const ResolvedTag = "white_check_mark"

// Tags are the tags of a push of rule's kind: its own, then the rule's
// name as plain text, which ntfy lists below the message; a resolution
// is tagged as one.
func Tags(rule watchdog.RuleName, resolved bool) []string {
	tag, ok := ruleTags[rule]
	if !ok {
		tag = DefaultTag
	}
	if resolved {
		tag = ResolvedTag
	}
	if rule == "" {
		return []string{tag}
	}
	return []string{tag, string(rule)}
}
