package phaseserver

import (
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

func TestReasonStrength(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   int
	}{
		{"", reasonHow},
		{"the process exited before the phase ended", reasonHow},
		{"rank 1: the process exited before the phase ended", reasonHow},
		{"died without ending (pid 4242 gone)", reasonHow},
		{"exit code 1", reasonHow},
		{"killed by SIGTERM", reasonHow},
		{"SIGTERM", reasonHow},
		{"rank 0: SIGTERM", reasonOutside},
		{"interrupted by SIGINT", reasonOutside},
		{"KeyboardInterrupt", reasonOutside},
		{"SystemExit: exit status 143", reasonOutside},
		{"rank 0: Signal 15 (SIGTERM) received by PID 4242", reasonOutside},
		{"RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:29500", reasonOutside},
		{"rank 1: RuntimeError: [/opt/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete", reasonOwn},
		{"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1275, remote process exited or there was a network error", reasonOutside},
		{"ConnectionResetError: [Errno 104] Connection reset by peer", reasonOutside},
		// What rank 0's client reports when rank 1 is SIGKILLed (Debian's
		// torch 1.13, gloo over loopback: python/tests/torch_checks.py).
		{"RuntimeError: [./gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:1411: Connection reset by peer", reasonOutside},
		{"rank 1: Signal 9 (SIGKILL) received by PID 4242", reasonOwn},
		{"killed by SIGKILL", reasonOwn},
		{"killed by SIGSEGV (exit code 139)", reasonOwn},
		{"rank 1: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", reasonOwn},
		{"OSError: [Errno 28] No space left on device", reasonOwn},
	} {
		if got := reasonStrength(tc.reason); got != tc.want {
			t.Errorf("reasonStrength(%q) = %d, want %d", tc.reason, got, tc.want)
		}
	}
}

// Multi-rank: the reason kept is the first cause, not the first report. A
// signal the launcher sent the survivors, or a peer's disconnect, gives
// way to a rank's own crash, or torchrun's root cause from `phase run`,
// within rootCauseWindow, in the table and in the end the watchdog reads;
// a cause is never replaced, and the first of two causes stays.
func TestRootCauseReplacesWhatTheSurvivorsSaw(t *testing.T) {
	const (
		sigterm  = "SIGTERM"
		peer     = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:41234"
		sigkill  = "rank 1: Signal 9 (SIGKILL) received by PID 4242"
		oom      = "rank 1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
		valueErr = "rank 0: ValueError: bad batch"
	)
	for _, tc := range []struct {
		name    string
		reasons []string
		after   time.Duration // between the first end and the others
		want    string
		outside bool
	}{
		{"launcher's SIGTERM, then torchrun's root cause", []string{sigterm, sigkill}, 3 * time.Second, sigkill, false},
		{"peer's disconnect, then the crash", []string{peer, oom}, time.Second, oom, false},
		{"peer, SIGTERM, then the crash", []string{peer, sigterm, oom}, time.Second, oom, false},
		{"the crash first", []string{oom, sigterm, peer}, time.Second, oom, false},
		{"two causes: the first stays", []string{valueErr, sigkill}, time.Second, valueErr, false},
		{"the crash after the window", []string{sigterm, sigkill}, rootCauseWindow + time.Second, sigterm, false},
		{"only what the survivors saw", []string{peer, sigterm}, time.Second, peer, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			apply := func(req phaseapi.HeartbeatRequest) {
				t.Helper()
				if _, err := env.e.Apply(req); err != nil {
					t.Fatal(err)
				}
			}
			apply(phaseapi.HeartbeatRequest{Phase: "DDP", Event: phaseapi.EventStart})
			for i, r := range tc.reasons {
				if i == 1 {
					env.clock.Advance(tc.after)
				}
				apply(phaseapi.HeartbeatRequest{Phase: "DDP", Event: phaseapi.EventEnd, Status: phaseapi.StatusFailed, Reason: r})
			}
			p, _ := env.phase("DDP")
			if p.Reason != tc.want {
				t.Errorf("reason %q, want %q", p.Reason, tc.want)
			}
			ends := env.e.Ends()
			if len(ends) != 1 {
				t.Fatalf("%d ends, want 1: %+v", len(ends), ends)
			}
			if ends[0].Reason != tc.want || ends[0].Outside != tc.outside || !ends[0].Ended.Equal(t0) {
				t.Errorf("end %+v, want reason %q, outside %v, ended at the first report", ends[0], tc.want, tc.outside)
			}
		})
	}
}
