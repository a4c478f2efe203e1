package pushtext

import (
	"math"
	"strconv"
	"time"
)

// SwapBackUnder is the resolution of a swap alert known only by the figures
// it fired with, as Alertmanager's is: Prometheus resolves an alert with the
// annotations of its last firing evaluation, so those figures would read as
// swap's now while swap has fallen. It says what the resolution does mean:
// "resolved: swap back under 50% after 42m", with the alert rule's threshold
// (outside (0, 1]: unknown, "back under its threshold"), subject "resolved
// swap". The watchdog, which reads swap as it resolves, gives the figures.
func SwapBackUnder(threshold float64, lasted time.Duration) Text {
	under := "its threshold"
	if threshold > 0 && threshold <= 1 {
		// Rounded up, so that "under 58%" holds of every ratio under a
		// threshold of 0.575; the tiny margin keeps 0.07 (7.000000000000001
		// times 100) at 7%.
		under = strconv.Itoa(int(math.Ceil(threshold*100-1e-9))) + "%"
	}
	return Resolved(Text{Body: "swap back under " + under, Subject: "swap"}, lasted)
}
