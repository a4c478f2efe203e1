package pushtext

import (
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/watchdog"
)

// TestAlertTexts pins the wording of each kind the switch in Alert lists,
// firing and resolved, as the watchdog's alerts give it: the bridge pushes
// these bodies after its prefix and writes these subjects to the run log.
func TestAlertTexts(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	swap := watchdog.Swap{Ratio: 0.54, UsedBytes: giBytes(16.3), TotalBytes: 32 * bytesPerGiB}
	alert := func(rule watchdog.RuleName, status watchdog.Status, s watchdog.Sample) watchdog.Alert {
		return watchdog.Alert{Rule: rule, Status: status, Began: t0, At: t0.Add(42 * time.Minute), Sample: s}
	}
	oom := alert(watchdog.RuleOOM, watchdog.Firing, watchdog.Sample{Swap: swap})
	oom.Kills, oom.Phase, oom.Victim = 3, "Pretrain 1/3", watchdog.Victim{PID: 4242, Name: "python3", Seq: 1, Owner: watchdog.VictimOfPhase, Phase: "Pretrain 1/3"}
	notPhase := oom
	notPhase.Kills, notPhase.Phase, notPhase.Victim.Owner, notPhase.Victim.Phase = 1, "", watchdog.VictimOfNoPhase, ""
	unjudged := notPhase
	unjudged.Victim.Owner = watchdog.VictimOwnerUnknown
	unknown := alert(watchdog.RuleOOM, watchdog.Firing, watchdog.Sample{Swap: swap})
	unknown.Kills, unknown.Phase = 1, "Pretrain 1/3" // a phase ran: not said
	tests := []struct {
		a             watchdog.Alert
		body, subject string
	}{
		{alert(watchdog.RuleSwap, watchdog.Firing, watchdog.Sample{Swap: swap}),
			"swap 54% full (16.3/32.0 GB) — consider intervening", "swap 54%"},
		{alert(watchdog.RuleSwap, watchdog.Resolved, watchdog.Sample{Swap: swap}),
			"resolved: swap 54% full (16.3/32.0 GB) after 42m", "resolved swap 54%"},
		{alert(watchdog.RulePressure, watchdog.Firing, watchdog.Sample{Swap: swap, Pressure: watchdog.Pressure{Available: true, Some: 0.23}}),
			"memory pressure 23% (last 10s), swap 54% full (16.3/32.0 GB) — consider intervening", "pressure 23%"},
		{alert(watchdog.RulePressure, watchdog.Firing, watchdog.Sample{Pressure: watchdog.Pressure{Available: true, Some: 0.23}}),
			"memory pressure 23% (last 10s), no swap — consider intervening", "pressure 23%"},
		{oom, `OOM killer struck python3 (pid 4242) of phase "Pretrain 1/3", and 2 more — swap 54% full (16.3/32.0 GB)`, "oom 3 kills"},
		{notPhase, `OOM killer struck python3 (pid 4242), not a phase's process — swap 54% full (16.3/32.0 GB)`, "oom 1 kill"},
		{unjudged, `OOM killer struck python3 (pid 4242) — swap 54% full (16.3/32.0 GB)`, "oom 1 kill"},
		{unknown, `OOM killer struck (1 kill), victim unknown — swap 54% full (16.3/32.0 GB)`, "oom 1 kill"},
		{alert("mystery", watchdog.Firing, watchdog.Sample{}), "mystery firing", "mystery"},
	}
	for _, tt := range tests {
		got := Alert(tt.a)
		if got.Body != tt.body || got.Subject != tt.subject {
			t.Errorf("Alert(%s %s)\n got %q / %q\nwant %q / %q", tt.a.Rule, tt.a.Status, got.Body, got.Subject, tt.body, tt.subject)
		}
	}
}

// TestJoinNamedAndSelfTest: several alerts in one push, an alert with no
// wording of its own, and the self-test, which must be longer than any
// push so the client cuts it to the longest there is.
func TestJoinNamedAndSelfTest(t *testing.T) {
	j := Join([]Text{Swap(SwapFigures{Ratio: 0.6}), OOM(OOMFigures{Kills: 1})}, 512, 40)
	if j.Body != "swap 60% full — consider intervening; OOM killer struck (1 kill), victim unknown" || j.Subject != "swap 60% + oom 1 kill" {
		t.Errorf("Join = %+v", j)
	}
	if n := Named("DiskFull", "/data is 97% full"); n.Body != "DiskFull: /data is 97% full" || n.Subject != "DiskFull" {
		t.Errorf("Named = %+v", n)
	}
	if r := Resolved(Named("PhaseStalled", ""), 12*time.Minute); r.Body != "resolved: PhaseStalled after 12m" || r.Subject != "resolved PhaseStalled" {
		t.Errorf("Resolved(Named) = %+v", r)
	}
	// A name that happens to end like an urging text keeps its words.
	if r := Resolved(Named("x — consider intervening", ""), 0); r.Body != "resolved: x — consider intervening" {
		t.Errorf("Resolved kept %q", r.Body)
	}
	for _, enc := range []string{"", "aes-256-gcm"} {
		st := SelfTest(enc)
		if want := "test push (" + map[string]string{"": "not encrypted"}[enc] + enc + ") at the longest"; !strings.HasPrefix(st.Body, want) || len(WithPrefix(DefaultPrefix, st.Body)) <= 512 {
			t.Errorf("SelfTest(%q) = %d bytes %q", enc, len(st.Body), st.Body)
		}
	}
}
