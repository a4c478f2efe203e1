package main

import (
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestMain keeps commands started through run() from changing the test
// binary's own runtime settings (TestRuntimeFlags checks what they would
// ask app to set).
func TestMain(m *testing.M) {
	applyRuntime = func(app.RuntimeOptions, *slog.Logger) error { return nil }
	// The parallel serve, exporter and phase tests wait on poll
	// intervals and HTTP round trips, not on the CPU.
	testkit.WaitBoundParallel(8)
	os.Exit(m.Run())
}

// TestRuntimeFlags checks the options each serving command gives
// app.ApplyRuntime, from its flags and the environment; app's
// TestApplyRuntime checks what the runtime then gets.
func TestRuntimeFlags(t *testing.T) {
	gogc := func(n int) *int { return &n }
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    app.RuntimeOptions
		wantErr string
	}{
		{name: "defaults: one P, as node_exporter; GOGC left to app", want: app.RuntimeOptions{GoMaxProcs: 1}},
		{name: "flags", args: []string{"--runtime.gomaxprocs=4", "--runtime.gogc=120"}, want: app.RuntimeOptions{GoMaxProcs: 4, GoGC: gogc(120)}},
		{name: "zero keeps Go's GOMAXPROCS", args: []string{"--runtime.gomaxprocs=0"}, want: app.RuntimeOptions{}},
		{name: "GOMAXPROCS from the environment; GOGC is the runtime's",
			env:  map[string]string{"GOMAXPROCS": "3", "GOGC": "off"},
			want: app.RuntimeOptions{GoMaxProcs: 3}},
		{name: "LAVENDER_ variables", env: map[string]string{"LAVENDER_RUNTIME_GOMAXPROCS": "2", "LAVENDER_RUNTIME_GOGC": "60"},
			want: app.RuntimeOptions{GoMaxProcs: 2, GoGC: gogc(60)}},
		{name: "flags beat the environment", env: map[string]string{"GOMAXPROCS": "3", "GOGC": "200"},
			args: []string{"--runtime.gomaxprocs=2", "--runtime.gogc=50"}, want: app.RuntimeOptions{GoMaxProcs: 2, GoGC: gogc(50)}},
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
				var got []app.RuntimeOptions
				saved := applyRuntime
				applyRuntime = func(o app.RuntimeOptions, _ *slog.Logger) error { got = append(got, o); return nil }
				err := flags.apply(slog.New(slog.DiscardHandler))
				applyRuntime = saved
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Errorf("%s: error %v, want %q", cmd, err, tc.wantErr)
					}
					if len(got) != 0 {
						t.Errorf("%s: asked app for %+v despite the error", cmd, got)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", cmd, err)
				}
				if len(got) != 1 || got[0].GoMaxProcs != tc.want.GoMaxProcs || !reflect.DeepEqual(got[0].GoGC, tc.want.GoGC) {
					t.Errorf("%s: asked app for %s, want one call with %s", cmd, describeRuntime(got), describeRuntime([]app.RuntimeOptions{tc.want}))
				}
			}
		})
	}
}

// describeRuntime prints runtime options with GoGC's value, not its address.
func describeRuntime(opts []app.RuntimeOptions) string {
	var parts []string
	for _, o := range opts {
		gc := "nil"
		if o.GoGC != nil {
			gc = strconv.Itoa(*o.GoGC)
		}
		parts = append(parts, fmt.Sprintf("{GoMaxProcs: %d, GoGC: %s}", o.GoMaxProcs, gc))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
