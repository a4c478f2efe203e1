package main

import (
	"math"
	"os/exec"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/watchdog"
)

// TestServePhaseRunWithThePythonClient: the lavender package inside
// `lavender phase run` reports into the wrapper's phase (LAVENDER_PHASE):
// no second phase, its progress and loss on the wrapper's, and its own
// reason in the one failed push, although the script's exit status alone
// would say less.
func TestServePhaseRunWithThePythonClient(t *testing.T) {
	python, pkg := python3(t), pythonClientDir(t)
	t.Setenv("PYTHONPATH", pkg)
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	r := startPhaseServe(t, newFakeClock(), "")
	script := `
import lavender, time
with lavender.phase("a name of its own", every=0.05, total=10) as p:
    for step in range(1, 11):
        p.progress(step, 10, loss=1.0 / step)
        time.sleep(0.02)
        if step == 7:
            raise ValueError("shape mismatch: [4, 8] vs [4, 9]")
`
	if code := r.phaseRun("Pretrain 1/3", python, "-c", script); code != 1 {
		t.Fatalf("exit %d", code)
	}
	r.wantPushes([]string{`[lavender-2] phase "Pretrain 1/3" failed after 0s: ValueError: shape mismatch: [4, 8] vs [4, 9]`},
		[]string{"BARK failed Pretrain 1/3 sent ok=1 fail=0"})
	p := r.phaseNamed("Pretrain 1/3")
	if p.Step == nil || *p.Step != 7 || p.Total != 10 || p.Status != phaseapi.StatusFailed || p.Loss == nil || float64(*p.Loss) != 1.0/7 {
		t.Errorf("phase: step %v/%d %s loss %v; want the client's step 7/10, failed, loss 1/7", p.Step, p.Total, p.Status, p.Loss)
	}
	text := runlogtest.Text(t, r.logDir)
	if strings.Contains(text, "a name of its own") || strings.Count(text, "START Pretrain 1/3") != 1 {
		t.Errorf("run log:\n%s\nwant one phase, the wrapper's", text)
	}
}

// TestServePushesADivergedLoss: a NaN loss from the Python client (as the
// Hugging Face callback reads it past logging_nan_inf_filter) is pushed
// once, with the step, though the run goes on and ends ok; its end then
// pushes done as any other.
func TestServePushesADivergedLoss(t *testing.T) {
	t.Parallel()
	python, pkg := python3(t), pythonClientDir(t)
	clock := newFakeClock()
	r := startPhaseServe(t, clock, "")
	script := `
import lavender, time
with lavender.phase("Pretrain 1/3", every=0.05, total=50) as p:
    for step in range(1, 51):
        p.progress(step, 50, loss=float("nan") if step >= 20 else 1.0 / step)
        time.sleep(0.01 if step < 20 else 0.05)
`
	cmd := exec.Command(python, "-c", script)
	cmd.Env = append(cmd.Environ(), "LAVENDER_URL="+r.base, "PYTHONPATH="+pkg, "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	r.bark.WaitPushes(t, 1)
	r.waitPolls(2)
	clock.Advance(watchdog.DoneSettle) // the ok end settles: done
	r.bark.WaitPushes(t, 2)
	r.waitPolls(3)
	got := r.pushes()
	if len(got) != 2 || !strings.HasPrefix(got[0], `[lavender-2] phase "Pretrain 1/3" loss is NaN at step `) ||
		!strings.HasSuffix(got[0], "/50 — training diverged") || !strings.HasPrefix(got[1], `[lavender-2] phase "Pretrain 1/3" done in `) {
		t.Fatalf("pushes %q; want one loss push, then done", got)
	}
	if lines := r.barkLines(); len(lines) != 2 || lines[0] != "BARK loss Pretrain 1/3 sent ok=1 fail=0" || lines[1] != "BARK done Pretrain 1/3 sent ok=1 fail=0" {
		t.Errorf("run log BARK lines %q", lines)
	}
	if p := r.phaseNamed("Pretrain 1/3"); p.Status != phaseapi.StatusOK || p.Loss == nil || !math.IsNaN(float64(*p.Loss)) {
		t.Errorf("phase %s loss %v; want ended ok with the NaN loss", p.Status, p.Loss)
	}
}
