package testkit

import (
	"fmt"
	"strings"
	"testing"
)

// SwapAlertWebhook is Alertmanager's payload for the swap alert. Each i is
// a different alert (fingerprint and start), so the bridge's dedup lets
// every one through to Bark.
func SwapAlertWebhook(i int) []byte {
	return fmt.Appendf(nil, `{"version":"4","status":"firing","receiver":"bark","groupKey":"{}:{alertname=\"SwapUsageHigh\"}",`+
		`"alerts":[{"status":"firing","labels":{"alertname":"SwapUsageHigh","instance":"box:9877"},`+
		`"annotations":{"swap_used_ratio":"0.54","swap_used_bytes":"17501991731","swap_total_bytes":"3.4359738368e+10"},`+
		`"startsAt":"2026-04-24T00:45:%02d.%06dZ","fingerprint":"%016x"}]}`, i%60, i, i+1)
}

// QuietServeArgs are serve's flags for a test that is not about the
// watchdog: a procfs with swap 10 % full, the watchdog off, the given Bark
// config and logs dirs, logs at debug level, a port from the kernel.
func QuietServeArgs(t *testing.T, barkDir, logDir string, extra ...string) []string {
	return append([]string{"serve", "--web.listen-address=127.0.0.1:0", "--log.level=debug",
		"--path.procfs=" + SwapProcfs(t, 0.10), "--watchdog.interval=0",
		"--runlog.dir=" + logDir, "--bark.config-dir=" + barkDir}, extra...)
}

// PostSwapStorm posts swap alerts 0…n-1 (SwapAlertWebhook, each a new
// alert) to base's webhook and checks that the first two push and the rest
// are held, as --bark.max-per-minute=2 has it.
func PostSwapStorm(t *testing.T, base string, n int) {
	t.Helper()
	for i := range n {
		code, answer := MustDo(t, nil, "POST", base+"/webhook", SwapAlertWebhook(i), "", "")
		want := "pushed=1"
		if i >= 2 {
			want = "held=1"
		}
		if code != 200 || !strings.Contains(answer, want) {
			t.Fatalf("alert %d: %d %q, want 200 and %s", i, code, answer, want)
		}
	}
}
