// The tests in this file run in every build, with cgo or without.

package gpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Without a Reader (no cgo, no driver, no GPU) the collector exports the
// reason and nothing else; this test runs in every build.
func TestCollectorDisabled(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{ErrNoCgo, "no_cgo"},
		{fmt.Errorf("%w: nvml.Init: ERROR_LIBRARY_NOT_FOUND", ErrNoDriver), "no_driver"},
		{ErrNoGPU, "no_gpu"},
		{ErrDisabled, "disabled"},
		{fmt.Errorf("nvml.Init: ERROR_LIB_RM_VERSION_MISMATCH"), "nvml_error"},
	} {
		want := `
# HELP lavender_gpu_telemetry_enabled 1 when GPU telemetry reads NVML; 0 with the reason (no_cgo, no_driver, no_gpu, disabled, nvml_error, closed) when it does not.
# TYPE lavender_gpu_telemetry_enabled gauge
lavender_gpu_telemetry_enabled{reason="` + tc.reason + `"} 0
`
		c := NewCollector(nil, tc.err)
		if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
			t.Errorf("%v: %v", tc.err, err)
		}
		if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
			t.Errorf("lint: %v %v", problems, err)
		}
	}
}

// Open in this build: with cgo it reaches for the real library (absent
// here), without it it says the build has none.
func TestOpenSaysWhyNot(t *testing.T) {
	r, err := Open(Options{LibraryPath: "/nonexistent/libnvidia-ml.so.1"})
	if r != nil || err == nil {
		t.Fatalf("Open: %v, %v", r, err)
	}
	if got := Reason(err); got != "no_cgo" && got != "no_driver" {
		t.Errorf("reason %q (%v)", got, err)
	}
	t.Logf("Open: %v", err)
}

func TestBusIDNormalisation(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"00000000:3B:00.0", "0000:3b:00"}, // NVML's busId
		{"0000:3B:00.0", "0000:3b:00"},     // NVML's busIdLegacy
		{"0000:3b:00", "0000:3b:00"},       // kmsg.Fault.GPU, the driver's Xid record
		{"PCI:0000:3b:00", "0000:3b:00"},   // the Xid record's text
		{"0000:b3:00.0", "0000:b3:00"},     // sysfs, the "fallen off the bus" message
		{" 00000001:DB:1f.0 ", "0001:db:1f"},
		{"00010000:01:00.0", "10000:01:00"}, // a VMD domain, wider than four digits
	} {
		got, ok := NormalizeBusID(tc.in)
		if !ok || got != tc.want {
			t.Errorf("NormalizeBusID(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
	for _, bad := range []string{"", "3b:00.0", "0000:3b:00.x", "0000:3g:00", "0000:3b:20", "000000000:3b:00", "0000:3b:00:0", "GPU-1234"} {
		if got, ok := NormalizeBusID(bad); ok {
			t.Errorf("NormalizeBusID(%q) = %q, want no address", bad, got)
		}
	}
	// An NVML busId and the kernel log's name for the same GPU are one.
	nv, _ := NormalizeBusID("00000000:3B:00.0")
	km, _ := NormalizeBusID("0000:3b:00")
	if nv != km {
		t.Errorf("NVML %q != kmsg %q", nv, km)
	}
}

func TestCString(t *testing.T) {
	b := [32]int8{'0', '0', ':', '1', 0, 'x'}
	if got := cString(b[:]); got != "00:1" {
		t.Errorf("cString = %q", got)
	}
	full := [3]int8{'a', 'b', 'c'}
	if got := cString(full[:]); got != "abc" {
		t.Errorf("cString without NUL = %q", got)
	}
}

func TestClockEventReasonHelpers(t *testing.T) {
	r := ReasonGpuIdle | ReasonHWThermalSlowdown
	if !r.Idle() || !r.HWThermalSlowdown() || !r.AnyHW() || r.HWSlowdown() || r.SWPowerCap() || r.SWThermalSlowdown() ||
		r.HWPowerBrakeSlowdown() || r.SyncBoost() {
		t.Errorf("%#x: helpers disagree with the bits", uint64(r))
	}
	if ReasonSWPowerCap.AnyHW() {
		t.Error("the power cap is no hardware slowdown")
	}
	seen := ClockEventReasons(0)
	for _, n := range ClockEventReasonNames {
		if seen&n.Bit != 0 {
			t.Errorf("%s: bit %#x named twice", n.Name, uint64(n.Bit))
		}
		seen |= n.Bit
	}
	if seen != 0x1ff {
		t.Errorf("named bits %#x, want nvml.h's 0x1 to 0x100", uint64(seen))
	}
}
