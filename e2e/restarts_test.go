package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

// TestRestartKeepsPhase: `serve --run.resume` killed with SIGKILL in the
// middle of a phase comes back with the phase active, its start time and
// heartbeats as last saved, and the phase ends normally afterwards.
func TestRestartKeepsPhase(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	logDir := t.TempDir()
	addr := testkit.FreeAddrs(t, 1)[0] // the restart comes back on the same port
	base := "http://" + addr
	args := []string{"serve", "--web.listen-address=" + addr, "--path.procfs=" + testkit.SwapProcfs(t, 0.10),
		"--runlog.dir=" + logDir, "--bark.config-dir=" + barktest.ConfigDir(t, nil), "--watchdog.interval=0", "--run.resume"}
	first := testkit.StartCommandWith(t, testkit.Options{KillAtEnd: true}, args...)
	testkit.WaitReady(t, nil, base, "", "")
	if code, body := testkit.MustDo(t, nil, "POST", base+"/api/v1/heartbeat", []byte(`{"phase":"Pretrain 1/3","event":"start"}`), "", ""); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	type phases struct {
		Phases []struct {
			Name    string    `json:"name"`
			Status  string    `json:"status"`
			Started time.Time `json:"started"`
		} `json:"phases"`
	}
	var before phases
	_, body := testkit.MustDo(t, nil, "GET", base+"/api/v1/phases", nil, "", "")
	if err := json.Unmarshal([]byte(body), &before); err != nil {
		t.Fatalf("phases before the kill: %v\n%s", err, body)
	}
	run, _ := runlog.CurrentPath(logDir)

	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done()

	testkit.StartCommand(t, args...)
	testkit.WaitReady(t, nil, base, "", "")
	if now, _ := runlog.CurrentPath(logDir); now != run {
		t.Errorf("restart with --run.resume started run %s, want %s", now, run)
	}
	var after phases
	_, body = testkit.MustDo(t, nil, "GET", base+"/api/v1/phases", nil, "", "")
	if err := json.Unmarshal([]byte(body), &after); err != nil {
		t.Fatal(err)
	}
	if len(after.Phases) != 1 || len(before.Phases) != 1 || after.Phases[0].Status != "active" ||
		!after.Phases[0].Started.Equal(before.Phases[0].Started) {
		t.Fatalf("phases after kill -9 and restart: %s\nbefore: %+v", body, before)
	}
	m := testkit.Scrape(t, nil, base+"/metrics")
	if v := m.MustValue(t, "lavender_phase_active", testkit.Labels{"phase": "Pretrain 1/3"}); v != 1 {
		t.Errorf("lavender_phase_active is %v after the restart, want 1", v)
	}
	if code, body := testkit.MustDo(t, nil, "POST", base+"/api/v1/heartbeat", []byte(`{"phase":"Pretrain 1/3","event":"end"}`), "", ""); code != 200 {
		t.Fatalf("end after restart: %d %s", code, body)
	}
	log := runlogtest.Text(t, logDir)
	if strings.Count(log, "START Pretrain 1/3") != 1 || strings.Count(log, "END   Pretrain 1/3") != 1 || strings.Count(log, "RUN start") != 1 {
		t.Errorf("run log after restart:\n%s", log)
	}
}
