package main

import (
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestMain keeps commands started through run() from changing the test
// binary's own runtime settings (TestRuntimeFlags checks what they would
// set).
func TestMain(m *testing.M) {
	setGOMAXPROCS = func(int) int { return runtime.GOMAXPROCS(0) }
	setGCPercent = func(int) int { return 0 } // apply ignores the old value
	// The parallel serve, exporter and phase tests wait on poll
	// intervals and HTTP round trips, not on the CPU.
	testkit.WaitBoundParallel(8)
	os.Exit(m.Run())
}

func TestRuntimeFlags(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       map[string]string
		args      []string
		wantProcs []int // what reaches runtime.GOMAXPROCS(n > 0)
		wantGOGC  []int // what reaches debug.SetGCPercent
		wantErr   string
	}{
		{name: "defaults: one P, as node_exporter; GOGC 75, as Prometheus", wantProcs: []int{1}, wantGOGC: []int{75}},
		{name: "flags", args: []string{"--runtime.gomaxprocs=4", "--runtime.gogc=120"}, wantProcs: []int{4}, wantGOGC: []int{120}},
		{name: "zero keeps Go's GOMAXPROCS", args: []string{"--runtime.gomaxprocs=0"}, wantGOGC: []int{75}},
		{name: "GOMAXPROCS and GOGC from the environment",
			env:       map[string]string{"GOMAXPROCS": "3", "GOGC": "off"},
			wantProcs: []int{3}}, // the runtime applied GOGC itself
		{name: "LAVENDER_ variables", env: map[string]string{"LAVENDER_RUNTIME_GOMAXPROCS": "2", "LAVENDER_RUNTIME_GOGC": "60"},
			wantProcs: []int{2}, wantGOGC: []int{60}},
		{name: "flags beat the environment", env: map[string]string{"GOMAXPROCS": "3", "GOGC": "200"},
			args: []string{"--runtime.gomaxprocs=2", "--runtime.gogc=50"}, wantProcs: []int{2}, wantGOGC: []int{50}},
		{name: "negative GOMAXPROCS", args: []string{"--runtime.gomaxprocs=-1"}, wantErr: "--runtime.gomaxprocs must be 0 (one per CPU) or more, not -1"},
		{name: "GOGC zero", args: []string{"--runtime.gogc=0"}, wantErr: "--runtime.gogc must be at least 1, not 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"GOMAXPROCS", "GOGC", "LAVENDER_RUNTIME_GOMAXPROCS", "LAVENDER_RUNTIME_GOGC"} {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			for _, cmd := range []string{"serve", "exporter", "bridge"} {
				cli := parseCLI(t, append([]string{cmd}, tc.args...)...)
				flags := map[string]runtimeFlags{
					"serve": cli.Serve.runtimeFlags, "exporter": cli.Exporter.runtimeFlags, "bridge": cli.Bridge.runtimeFlags,
				}[cmd]
				var procs, gogc []int
				savedProcs, savedGC := setGOMAXPROCS, setGCPercent
				setGOMAXPROCS = func(n int) int {
					if n > 0 {
						procs = append(procs, n)
					}
					return 1
				}
				setGCPercent = func(n int) int { gogc = append(gogc, n); return 100 }
				err := flags.apply(slog.New(slog.NewTextHandler(io.Discard, nil)))
				setGOMAXPROCS, setGCPercent = savedProcs, savedGC
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Errorf("%s: error %v, want %q", cmd, err, tc.wantErr)
					}
					if len(procs)+len(gogc) != 0 {
						t.Errorf("%s: changed the runtime (%v, %v) despite the error", cmd, procs, gogc)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", cmd, err)
				}
				if !slices.Equal(procs, tc.wantProcs) {
					t.Errorf("%s: GOMAXPROCS set to %v, want %v", cmd, procs, tc.wantProcs)
				}
				if !slices.Equal(gogc, tc.wantGOGC) {
					t.Errorf("%s: GOGC set to %v, want %v", cmd, gogc, tc.wantGOGC)
				}
			}
		})
	}
}
