package pushtext

import "lavender/watchdog"

// Events are the kinds of watchdog push, by the name of the rule that
// raises them: the names --bark.level takes. A new kind of push adds its
// rule's name here as well as to the switch in Alert.
var Events = []string{
	"swap", "pressure", "oom",
	watchdog.PhaseRuleFailed, watchdog.PhaseRuleStalled, watchdog.PhaseRuleDone, watchdog.PhaseRuleLoss,
	watchdog.KernelRuleGPU, watchdog.KernelRuleDisk, watchdog.DiskSpaceRule,
}
