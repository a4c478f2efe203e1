package phaseserver

import (
	"strings"
	"testing"
)

// TestWithFault: a fault that hit a phase becomes the reason of its failed
// end when the end only says how the process ended, comes first when the
// end is the GPU's failure as the code saw it, and leaves any other reason.
func TestWithFault(t *testing.T) {
	const fault = "GPU 0000:3b:00 Xid 79: fallen off the bus"
	for _, tc := range []struct{ reason, want string }{
		{"", fault},
		{"exit code 1", fault},
		{"exit code 1: Segmentation fault (core dumped)", fault},
		{"killed by SIGKILL", fault},
		{"killed by SIGABRT (exit code 134)", fault},
		{"died without ending (pid 4242 gone)", fault},
		{"RuntimeError: CUDA error: unspecified launch failure", fault + " (RuntimeError: CUDA error: unspecified launch failure)"},
		{"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970", fault + " (torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970)"},
		{"ValueError: bad learning rate", "ValueError: bad learning rate"},
		{"interrupted by SIGTERM", "interrupted by SIGTERM"},
	} {
		if got := withFault(fault, tc.reason); got != tc.want {
			t.Errorf("withFault(%q) = %q, want %q", tc.reason, got, tc.want)
		}
	}
	long := withFault(fault, "RuntimeError: CUDA error: "+strings.Repeat("x", 300))
	if len([]rune(long)) > 200 || !strings.HasSuffix(long, "…") {
		t.Errorf("a long combined reason is not cut to 200 characters: %d %q", len([]rune(long)), long)
	}
}
