package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
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

// TestKillBeforeThePollStillPushesTheEnd: a phase's failure accepted (200)
// by `serve --run.resume`, which is killed with SIGKILL before its
// watchdog's next poll read it: the restarted serve gives the saved ended
// phases back as ends, and the watchdog, which saved how far it had read
// them, pushes the failure once, with its reason.
func TestKillBeforeThePollStillPushesTheEnd(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bark := barktest.New(t)
	logDir := t.TempDir()
	addr := testkit.FreeAddrs(t, 1)[0] // the restart comes back on the same port
	base := "http://" + addr
	args := []string{"serve", "--web.listen-address=" + addr, "--path.procfs=" + testkit.SwapProcfs(t, 0.10), "--path.kmsg=",
		"--runlog.dir=" + logDir, "--bark.config-dir=" + barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.Template(barktest.Key) + "\n"}),
		"--watchdog.interval=1h", "--run.resume"} // no poll after the first until the kill
	first := testkit.StartCommandWith(t, testkit.Options{KillAtEnd: true}, args...)
	testkit.WaitReady(t, nil, base, "", "")
	state := filepath.Join(logDir, "watchdog-state.json")
	testkit.WaitFor(t, 20*time.Second, func() bool {
		data, err := os.ReadFile(state)
		return err == nil && strings.Contains(string(data), `"rule": "failed"`)
	}, "the first poll's watchdog state")
	for _, body := range []string{`{"phase":"Pretrain","event":"start"}`, `{"phase":"Pretrain","event":"end","status":"failed","reason":"RuntimeError: CUDA out of memory"}`} {
		if code, answer := testkit.MustDo(t, nil, "POST", base+"/api/v1/heartbeat", []byte(body), "", ""); code != 200 {
			t.Fatalf("%s: %d %s", body, code, answer)
		}
	}
	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	if n := bark.Count(); n != 0 {
		t.Fatalf("%d pushes before the kill, want none: the end was not read yet", n)
	}

	testkit.StartCommand(t, args...)
	testkit.WaitReady(t, nil, base, "", "")
	pushes := bark.WaitPushes(t, 1)
	if !strings.Contains(pushes[0].Body, `"Pretrain" failed`) || !strings.Contains(pushes[0].Body, "CUDA out of memory") {
		t.Errorf("the push after the restart: %q", pushes[0].Body)
	}
	time.Sleep(time.Second) // a second push would come at the same first poll
	if n := bark.Count(); n != 1 {
		t.Errorf("%d pushes after the restart, want the failure once", n)
	}
}
