package pushtext

import (
	"strings"

	"github.com/lavender-ml/lavender/watchdog"
)

// wording is how one watchdog rule's alerts are worded: the text of an
// alert, and the rule's name in a summary of held pushes.
type wording struct {
	rule watchdog.RuleName
	// summary names the rule's pushes in a storm summary, in the words of
	// the pushes ("swap high"). Each has a space, which no bare alert name
	// has, so an alert cannot pass for a watchdog event.
	summary string
	text    func(watchdog.Alert) Text
}

// wordings registers every rule's wording, one line a rule, in the order
// --bark.level lists its events. A new rule adds its line here; a rule
// without one still reaches the phone, by name.
var wordings = []wording{
	{watchdog.RuleSwap, "swap high", watchdogSwap},
	{watchdog.RulePressure, "memory pressure", watchdogPressure},
	{watchdog.RuleOOM, "OOM kill", watchdogOOM},
	{watchdog.RuleFailed, "phase failed", watchdogPhase},
	{watchdog.RuleStalled, "phase stalled", watchdogPhase},
	{watchdog.RuleDone, "phase done", watchdogPhase},
	{watchdog.RuleLoss, "loss diverged", watchdogLoss},
	{watchdog.RuleGPU, "GPU fault", kernelFault},
	{watchdog.RuleGPULost, "GPU lost", watchdogGPULost},
	{watchdog.RuleGPUECC, "GPU ECC errors", watchdogGPUECC},
	{watchdog.RuleGPURemap, "GPU row remap", watchdogGPURemap},
	{watchdog.RuleGPUHang, "GPUs hung", watchdogGPUHang},
	{watchdog.RuleGPUIdle, "GPUs idle", watchdogGPUIdle},
	{watchdog.RuleGPUSlowdown, "GPU slowdown", watchdogGPUSlowdown},
	{watchdog.RuleDisk, "storage fault", kernelFault},
	{watchdog.RuleDiskSpace, "disk space", DiskSpace},
}

// Events are the kinds of watchdog push, by the name of the rule that
// raises them: the events --bark.level takes.
var Events = func() []watchdog.RuleName {
	events := make([]watchdog.RuleName, len(wordings))
	for i, w := range wordings {
		events[i] = w.rule
	}
	return events
}()

// EventList is Events as --bark.level's help and errors list them:
// "swap, pressure, oom, …".
func EventList() string {
	names := make([]string, len(Events))
	for i, e := range Events {
		names[i] = string(e)
	}
	return strings.Join(names, ", ")
}

// SummaryName is how a storm summary names a rule's pushes ("swap high");
// ok is false for a rule pushtext has no wording for.
func SummaryName(rule watchdog.RuleName) (name string, ok bool) {
	w, ok := wordingOf(rule)
	return w.summary, ok
}

func wordingOf(rule watchdog.RuleName) (wording, bool) {
	for _, w := range wordings {
		if w.rule == rule {
			return w, true
		}
	}
	return wording{}, false
}
