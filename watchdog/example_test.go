package watchdog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lavender-ml/lavender/watchdog"
)

// Example shows how cmd wires the watchdog: the rules from the flags, a
// reader from the exporter, a pusher from watchpush, and a history for
// the status page. Here the reader and the pusher are stand-ins and the
// clock is fixed.
func Example() {
	rules, err := watchdog.NewRules(watchdog.DefaultRuleFlags)
	if err != nil {
		fmt.Println(err)
		return
	}
	history := watchdog.NewHistory(watchdog.DefaultStep)
	wd, err := watchdog.New(watchdog.Config{
		Rules:   rules,
		History: history,
		Read: func(context.Context) (watchdog.Sample, error) {
			return watchdog.Sample{
				Swap:     watchdog.Swap{UsedBytes: 17 << 30, TotalBytes: 32 << 30, Ratio: 17.0 / 32},
				Pressure: watchdog.Pressure{Available: true, Some: 0.23, Full: 0.20},
				OOM:      watchdog.OOM{Available: true, Kills: 2},
			}, nil
		},
		Push: watchdog.PushFunc(func(_ context.Context, alerts []watchdog.Alert) (ok, failed int) {
			for _, a := range alerts {
				fmt.Printf("%s %s: swap %.0f%%, pressure %.0f%%\n", a.Rule, a.Status, 100*a.Sample.Swap.Ratio, 100*a.Sample.Pressure.Some)
			}
			return 1, 0 // one target accepted the push
		}),
		Now: func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	wd.Poll(context.Background()) // before ready; then go wd.Run(ctx)
	fmt.Println(len(history.Samples()), "sample kept")
	// Output:
	// swap firing: swap 53%, pressure 23%
	// pressure firing: swap 53%, pressure 23%
	// 1 sample kept
}
