package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/watchdog"
)

// Swap of 2 GiB, as on the measured host: 26 % is 0.5 GB, 56 % 1.1 GB.
const swap2GiBinKB = 2 << 20

// watchdogRig is `lavender serve` on a fake procfs with PSI and oom_kill,
// polling every 20 ms, pushing to a Bark-compatible server.
type watchdogRig struct {
	*serveRig
	host *testkit.Procfs
}

func startWatchdogServe(t *testing.T, h testkit.Host, args ...string) *watchdogRig {
	t.Helper()
	host := testkit.NewProcfs(t, h)
	r := startServe(t, host, append([]string{"--watchdog.interval=20ms", "--watchdog.repeat=1h"}, args...)...)
	return &watchdogRig{serveRig: r, host: host}
}

// barkLines are the run log's BARK entries without their times.
func (r *watchdogRig) barkLines() []string { return runlogtest.BarkLines(r.t, r.logDir) }

func psi(someAvg10 float64) *testkit.PSI {
	return &testkit.PSI{SomeAvg10: someAvg10, SomeAvg60: someAvg10, FullAvg10: someAvg10 * 0.9, SomeTotal: 1000, FullTotal: 900}
}

func (r *watchdogRig) startPhase(name string) {
	r.t.Helper()
	if code, body := testkit.MustDo(r.t, nil, "POST", r.base+"/api/v1/heartbeat", []byte(`{"phase":"`+name+`","event":"start"}`), "", ""); code != 200 {
		r.t.Fatalf("heartbeat answered %d %s", code, body)
	}
}

// TestServeWatchdogPressureAndOOM: kills from before the start never push;
// pressure over the threshold pushes its text; a kill pushes at once, with
// the active phase; each push has its BARK line.
func TestServeWatchdogPressureAndOOM(t *testing.T) {
	t.Parallel()
	r := startWatchdogServe(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.26), PSI: psi(5), OOMKills: 3})
	r.waitPolls(5)
	if got := r.pushes(); len(got) != 0 {
		t.Fatalf("pushes for 3 kills from before the start or 5%% pressure: %q", got)
	}

	r.host.SetPSI(psi(23))
	r.bark.WaitPushes(t, 1)
	const pressure = "[lavender-2] memory pressure 23% (last 10s), swap 26% full (0.5/2.0 GB) — consider intervening"
	if got := r.pushes(); len(got) != 1 || got[0] != pressure {
		t.Fatalf("pushes %q, want [%q]", got, pressure)
	}

	r.startPhase("Pretrain 1/3")
	r.host.SetSwap(testkit.SwapAt(swap2GiBinKB, 0.56)) // swap 56 %: over the swap threshold too, in its own poll
	r.bark.WaitPushes(t, 2)
	r.host.SetOOMKills(4)
	r.bark.WaitPushes(t, 3)
	r.waitPolls(3)
	want := []string{
		pressure,
		"[lavender-2] swap 56% full (1.1/2.0 GB) — consider intervening",
		`[lavender-2] OOM killer struck (1 kill), victim unknown — swap 56% full (1.1/2.0 GB)`,
	}
	if got := r.pushes(); !slices.Equal(got, want) {
		t.Fatalf("pushes\n%q\nwant\n%q", got, want)
	}
	wantLines := []string{"BARK pressure 23% sent ok=1 fail=0", "BARK swap 56% sent ok=1 fail=0", "BARK oom 1 kill sent ok=1 fail=0"}
	if got := r.barkLines(); !slices.Equal(got, wantLines) {
		t.Errorf("run log BARK lines %q, want %q", got, wantLines)
	}
	if v := r.metric("lavender_watchdog_armed", nil); v != 0 {
		t.Errorf("lavender_watchdog_armed = %v after the swap push", v)
	}
}

// TestServeWatchdogSeveralRulesOnePush: swap and pressure over their
// thresholds in the same poll reach the phone as one push, with one BARK
// line. The host is set before the start, so the first poll sees both: the
// fake procfs writes its files one at a time, so a change made later could
// be seen half by one poll and half by the next. (Three rules at once, OOM
// included, are covered by watchpush's TestPushTexts and the watchdog's
// TestSeveralRulesInOnePollGiveOnePush.)
func TestServeWatchdogSeveralRulesOnePush(t *testing.T) {
	t.Parallel()
	r := startWatchdogServe(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.56), PSI: psi(23), OOMKills: 7})
	r.bark.WaitPushes(t, 1)
	r.waitPolls(3)
	const want = "[lavender-2] swap 56% full (1.1/2.0 GB) — consider intervening; " +
		"memory pressure 23% (last 10s), swap 56% full (1.1/2.0 GB) — consider intervening"
	if got := r.pushes(); len(got) != 1 || got[0] != want {
		t.Fatalf("pushes %q\nwant one: %q", got, want)
	}
	if got := r.barkLines(); len(got) != 1 || got[0] != "BARK swap 56% + pressure 23% sent ok=1 fail=0" {
		t.Errorf("run log BARK lines %q", got)
	}
}

// TestServeWatchdogWithoutPSI: a kernel without PSI gives no pressure push
// and no error, while swap still pushes.
func TestServeWatchdogWithoutPSI(t *testing.T) {
	t.Parallel()
	r := startWatchdogServe(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.20)})
	r.waitPolls(3)
	if v := r.metric("lavender_watchdog_errors_total", nil); v != 0 {
		t.Errorf("lavender_watchdog_errors_total = %v on a host without PSI", v)
	}
	if v := r.metric("lavender_watchdog_rule_armed", testkit.Labels{"rule": "pressure"}); v != 1 {
		t.Errorf("pressure rule armed = %v", v)
	}
	r.host.SetSwap(testkit.SwapAt(swap2GiBinKB, 0.56))
	r.bark.WaitPushes(t, 1)
	r.waitPolls(3)
	if got := r.pushes(); len(got) != 1 || got[0] != "[lavender-2] swap 56% full (1.1/2.0 GB) — consider intervening" {
		t.Errorf("pushes %q", got)
	}
	_, page := testkit.MustDo(t, nil, "GET", r.base+"/api/v1/status", nil, "", "")
	if strings.Contains(page, "pressure_some_avg10") {
		t.Errorf("status shows a pressure the host does not have: %s", page)
	}
}

// TestServeWatchdogNamesTheVictim: with a readable kernel log the OOM push
// names the process; a kill logged before the start is not named.
func TestServeWatchdogNamesTheVictim(t *testing.T) {
	t.Parallel()
	kmsg := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(kmsg, []byte("3,10,100,-;Out of memory: Killed process 11 (before-start) total-vm:1kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startWatchdogServe(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.26), OOMKills: 1}, "--path.kmsg="+kmsg)
	r.startPhase("Pretrain 1/3")
	r.waitPolls(3)
	f, err := os.OpenFile(kmsg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("6,20,200,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=python3,pid=4242,uid=1000\n" +
		"3,21,201,-;Out of memory: Killed process 4242 (python3) total-vm:9000000kB, anon-rss:8000000kB\n")
	f.Close()
	r.host.SetOOMKills(2)
	r.bark.WaitPushes(t, 1)
	// The fake procfs names no host, so whose process it was is not
	// judged; that a phase ran does not make it the phase's.
	const want = `[lavender-2] OOM killer struck python3 (pid 4242) — swap 26% full (0.5/2.0 GB)`
	if got := r.pushes(); len(got) != 1 || got[0] != want {
		t.Errorf("pushes %q, want [%q]", got, want)
	}
	r.waitPolls(2)
	if got := r.barkLines(); len(got) != 1 || got[0] != "BARK oom 1 kill sent ok=1 fail=0" {
		t.Errorf("run log BARK lines %q", got)
	}
}

// TestServeWatchdogRulesOff: --no-watchdog.oom and a pressure threshold of
// 0 silence their rules; their series disappear.
func TestServeWatchdogRulesOff(t *testing.T) {
	t.Parallel()
	r := startWatchdogServe(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.20), PSI: psi(2), OOMKills: 1},
		"--no-watchdog.oom", "--watchdog.pressure-threshold=0")
	r.waitPolls(2)
	r.host.Set(testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.20), PSI: psi(60), OOMKills: 5})
	r.waitPolls(5)
	if got := r.pushes(); len(got) != 0 {
		t.Errorf("pushes with the rules off: %q", got)
	}
	_, metrics := testkit.MustDo(t, nil, "GET", r.base+"/metrics", nil, "", "")
	if strings.Contains(metrics, `rule="oom"`) || strings.Contains(metrics, `rule="pressure"`) || !strings.Contains(metrics, `rule="swap"`) {
		t.Errorf("rule series:\n%s", grepLines(metrics, "lavender_watchdog_rule_armed"))
	}
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestServeWatchdogFlagErrors(t *testing.T) {
	for _, tt := range []struct{ arg, want string }{
		{"--watchdog.pressure-threshold=1.5", "--watchdog.pressure-threshold must be in [0, 1], not 1.5"},
		{"--watchdog.pressure-threshold=-0.1", "--watchdog.pressure-threshold must be in [0, 1], not -0.1"},
		{"--watchdog.hysteresis=0.2", "--watchdog.hysteresis must be in [0, --watchdog.pressure-threshold 0.1), not 0.2"},
		{"--watchdog.interval=-1s", "--watchdog.interval must not be negative, not -1s"},
	} {
		t.Run(tt.arg, func(t *testing.T) {
			// Checked with the watchdog off too: a bad value never passes silently.
			for _, off := range []string{"--watchdog.interval=5s", "--watchdog.interval=0"} {
				if tt.arg == "--watchdog.interval=-1s" {
					off = tt.arg
				}
				cli := parseCLI(t, "serve", "--web.listen-address=127.0.0.1:0", "--bark.config-dir="+t.TempDir(),
					"--runlog.dir="+t.TempDir(), "--path.procfs="+testkit.SwapProcfs(t, 0.2), off, tt.arg)
				err := cli.Serve.serve(t.Context(), &Globals{Logger: slog.New(slog.DiscardHandler)}, nil, nil)
				if err == nil || err.Error() != tt.want {
					t.Errorf("%s %s: %v, want %q", off, tt.arg, err, tt.want)
				}
			}
		})
	}
}

// TestStatusPageReadsTheHistoryWhileTheWatchdogPolls is for -race: the page
// reads the watchdog's history (through cmd's adapter: Latest, Samples,
// Window) while the watchdog's polls append to it and wrap its ring. The
// page once raced a poll by reading the ring unlocked.
func TestStatusPageReadsTheHistoryWhileTheWatchdogPolls(t *testing.T) {
	t.Parallel()
	r := startWatchdogServe(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.26), PSI: psi(3)},
		"--watchdog.interval=1ms", "--status.history-step=1ms")
	target := r.metric("lavender_watchdog_polls_total", nil) + 2*watchdog.HistorySamples // enough to wrap the ring
	pages := 0
	for ; pages < 5 || r.metric("lavender_watchdog_polls_total", nil) < target; pages++ {
		if code, _ := testkit.MustDo(t, nil, "GET", r.base+"/", nil, "", ""); code != 200 {
			t.Fatalf("status page answered %d", code)
		}
	}
	var status struct {
		History []struct {
			Pressure *float64 `json:"pressure_some_avg10"`
		} `json:"history"`
	}
	_, body := testkit.MustDo(t, nil, "GET", r.base+"/api/v1/status", nil, "", "")
	if err := json.Unmarshal([]byte(body), &status); err != nil {
		t.Fatal(err)
	}
	if n := len(status.History); n != watchdog.HistorySamples || status.History[n-1].Pressure == nil || *status.History[n-1].Pressure != 0.03 {
		t.Errorf("%d samples after %d pages, want a full ring of %d with pressure 0.03", n, pages, watchdog.HistorySamples)
	}
}
