package phaseserver

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/proctree"
	"github.com/lavender-ml/lavender/runlog"
)

// hiddenPhaseEnv carries the procfs, the pid and the logs dir to
// TestJudgePhaseAsNobody.
const hiddenPhaseEnv = "PHASESERVER_HIDDEN_PHASE"

// TestJudgePhaseAsNobody is run by TestHiddenPhaseIsNotDied as the user
// nobody, as serve runs under systemd's DynamicUser: it starts a phase of
// the pid it is given, checks the processes over three seconds, and prints
// how the phase stands, the gauge, how often the hiding was logged, and
// whose process pid 1 (root's, hidden too) is said to be.
func TestJudgePhaseAsNobody(t *testing.T) {
	arg := os.Getenv(hiddenPhaseEnv)
	if arg == "" {
		t.Skip("run by TestHiddenPhaseIsNotDied as the user nobody")
	}
	parts := strings.SplitN(arg, ":", 3)
	if len(parts) != 3 {
		t.Fatalf("%s=%q: want procfs:pid:logsdir", hiddenPhaseEnv, arg)
	}
	root, logs := parts[0], parts[2]
	pid, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	e := New(Config{ProcFS: root, Runlog: runlog.Options{Dir: logs}, Clock: clock.Now}, slog.New(slog.NewTextHandler(&logged, nil)))
	reg.MustRegister(e)
	host, err := proctree.ReadHost(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(phaseapi.HeartbeatRequest{Phase: "Long pretrain", Event: phaseapi.EventStart, PID: &pid, BootID: host.BootID, PIDNS: host.PIDNS}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		e.CheckProcesses()
		clock.Advance(time.Second)
	}
	p, _ := findPhase(e, "Long pretrain")
	m, err := testkit.GatherMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	hides := m.MustValue(t, "lavender_proc_hides_processes", nil)
	_, why := e.ProcVisibility()
	_, owner := e.OwnerOf(1, "init")
	fmt.Printf("PHASE status=%s reason=%q hides=%v warnings=%d owner-of-1=%s why=%q\n", p.Status, p.Reason, hides,
		strings.Count(logged.String(), "procfs hides other users' processes"), ownerName[owner], why)
}

var ownerName = map[Owner]string{OwnerUnknown: "unknown", OwnerPhase: "phase", OwnerNone: "none"}

// Serve as nobody, under a procfs mounted hidepid=invisible (what systemd's
// ProtectProc=invisible does), judging a phase whose process is root's: the
// process is invisible to it, and the phase must stay active, with the
// hiding said once in the log and in lavender_proc_hides_processes; a
// hidden process (pid 1) cannot be said to be no phase's. Once
// the process is really gone (kill(2) says ESRCH), the phase does end as
// died without ending.
func TestHiddenPhaseIsNotDied(t *testing.T) {
	root := testkit.MountProc(t, "hidepid=invisible")
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		child.Process.Kill()
		child.Wait()
	}()
	pid := child.Process.Pid
	asNobody := func() string {
		t.Helper()
		// nobody must reach and write the logs dir; TempDir's parents
		// are root's alone.
		logs, err := os.MkdirTemp("", "lavender-nobody-logs-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(logs) })
		if err := os.Chmod(logs, 0o777); err != nil {
			t.Fatal(err)
		}
		out, err := testkit.RunTestAs(t, testkit.NobodyID, "TestJudgePhaseAsNobody", fmt.Sprintf("%s=%s:%d:%s", hiddenPhaseEnv, root, pid, logs))
		if err != nil {
			t.Fatalf("as nobody: %v\n%s", err, out)
		}
		for line := range strings.Lines(out) {
			if strings.HasPrefix(line, "PHASE ") {
				return strings.TrimSpace(line)
			}
		}
		t.Fatalf("as nobody: no result in\n%s", out)
		return ""
	}
	why := fmt.Sprintf("why=%q", root+" is mounted with hidepid=invisible")
	if got, want := asNobody(), `PHASE status=active reason="" hides=1 warnings=1 owner-of-1=unknown `+why; got != want {
		t.Errorf("root's living process, judged by nobody:\n%s\nwant\n%s", got, want)
	}
	child.Process.Kill()
	child.Wait()
	want := fmt.Sprintf(`PHASE status=failed reason="died without ending (pid %d gone)" hides=1 warnings=1 owner-of-1=unknown %s`, pid, why)
	if got := asNobody(); got != want {
		t.Errorf("root's reaped process, judged by nobody:\n%s\nwant\n%s", got, want)
	}
}
