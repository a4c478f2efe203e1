package phaseserver

import (
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// TestRunningPhase: the active phase that started last, never an ended
// one, and none before the first start or after the last end.
func TestRunningPhase(t *testing.T) {
	env := newTestEnv(t)
	running := func(want string, wantOK bool) {
		t.Helper()
		if got, ok := env.e.RunningPhase(); got != want || ok != wantOK {
			t.Errorf("RunningPhase() = %q, %v; want %q, %v", got, ok, want, wantOK)
		}
	}
	running("", false)
	env.beat("Pretrain", phaseapi.EventStart, "")
	running("Pretrain", true)
	env.clock.Advance(time.Minute)
	env.beat("Eval", phaseapi.EventStart, "")
	running("Eval", true)
	env.clock.Advance(time.Minute)
	env.beat("Pretrain", phaseapi.EventPing, "") // a ping is no new start
	running("Eval", true)
	env.beat("Eval", phaseapi.EventEnd, "")
	running("Pretrain", true)
	env.beat("Pretrain", phaseapi.EventEnd, phaseapi.StatusFailed)
	running("", false)
}
