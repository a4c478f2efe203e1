package watchpush

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lavender-ml/lavender/notify"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/watchdog"
)

// Levels maps a kind of watchdog push (one of pushtext.Events) to its Bark
// level; a kind it does not list is passive, the seed's choice for every
// push. Alertmanager's alerts are not in it: they keep their template's
// level.
type Levels map[watchdog.RuleName]string

// ParseLevels reads --bark.level's EVENT=LEVEL items (each may hold
// several, comma-separated). An unknown event or level is an error that
// names the known ones; an event given twice takes the last level.
func ParseLevels(items []string) (Levels, error) {
	levels := Levels{}
	for _, item := range items {
		for _, pair := range strings.Split(item, ",") {
			pair = strings.TrimSpace(pair)
			if pair == "" {
				continue
			}
			event, level, ok := strings.Cut(pair, "=")
			event, level = strings.TrimSpace(event), strings.TrimSpace(level)
			rule := watchdog.RuleName(event)
			switch {
			case !ok:
				return nil, fmt.Errorf("--bark.level: %q is not EVENT=LEVEL, e.g. failed=timeSensitive", pair)
			case !slices.Contains(pushtext.Events, rule):
				return nil, fmt.Errorf("--bark.level: unknown event %q; the events are %s", event, pushtext.EventList())
			case !slices.Contains(notify.Levels, level):
				return nil, fmt.Errorf("--bark.level: unknown level %q for %s; the levels are %s", level, event, strings.Join(notify.Levels, ", "))
			}
			levels[rule] = level
		}
	}
	return levels, nil
}

// rule is the level of a rule's pushes. "disk" names the disk's trouble
// as a person says it: the kernel log's storage faults and, unless
// "disk-space" is given on its own, the disk guard's pushes too. "gpu" so
// names the GPUs' trouble: the kernel log's Xids and, unless given on
// their own, the GPU telemetry rules (gpu-lost, gpu-hang, …): who asks for
// loud GPU pushes means a lost GPU too.
func (l Levels) rule(name watchdog.RuleName) string {
	level, ok := l[name]
	switch {
	case ok:
	case name == watchdog.RuleDiskSpace:
		level = l[watchdog.RuleDisk]
	case name.FromNVML():
		level = l[watchdog.RuleGPU]
	}
	return level
}

// of is the level of one push carrying alerts: the loudest of theirs. A
// resolution stays passive: it ends what a louder push began.
func (l Levels) of(alerts []watchdog.Alert) string {
	loudest := 0
	for _, a := range alerts {
		if a.Status == watchdog.Resolved {
			continue
		}
		if i := slices.Index(notify.Levels, l.rule(a.Rule)); i > loudest {
			loudest = i
		}
	}
	return notify.Levels[loudest]
}
