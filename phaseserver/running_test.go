package phaseserver

import (
	"testing"
	"time"
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
	env.beat("Pretrain", EventStart, "")
	running("Pretrain", true)
	env.clock.Advance(time.Minute)
	env.beat("Eval", EventStart, "")
	running("Eval", true)
	env.clock.Advance(time.Minute)
	env.beat("Pretrain", EventPing, "") // a ping is no new start
	running("Eval", true)
	env.beat("Eval", EventEnd, "")
	running("Pretrain", true)
	env.beat("Pretrain", EventEnd, StatusFailed)
	running("", false)
}
