package main

import (
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestMain keeps commands started through run() from changing the test
// binary's own GOMAXPROCS; TestRuntimeFlags checks what they would set.
func TestMain(m *testing.M) {
	setGOMAXPROCS = func(n int) int { return runtime.GOMAXPROCS(0) }
	os.Exit(m.Run())
}

func TestRuntimeFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    int // what reaches runtime.GOMAXPROCS; 0: not called to set
		wantErr string
	}{
		{name: "default is one, as node_exporter", want: 1},
		{name: "flag", args: []string{"--runtime.gomaxprocs=4"}, want: 4},
		{name: "zero keeps Go's default", args: []string{"--runtime.gomaxprocs=0"}, want: 0},
		{name: "GOMAXPROCS from the environment", env: map[string]string{"GOMAXPROCS": "3"}, want: 3},
		{name: "LAVENDER_ variable", env: map[string]string{"LAVENDER_RUNTIME_GOMAXPROCS": "2"}, want: 2},
		{name: "flag beats environment", env: map[string]string{"GOMAXPROCS": "3"}, args: []string{"--runtime.gomaxprocs=2"}, want: 2},
		{name: "negative", args: []string{"--runtime.gomaxprocs=-1"}, wantErr: "--runtime.gomaxprocs must be 0 (one per CPU) or more, not -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", "")
			os.Unsetenv("GOMAXPROCS")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			for _, cmd := range []string{"serve", "exporter", "bridge"} {
				cli := parseCLI(t, append([]string{cmd}, tc.args...)...)
				var flags runtimeFlags
				switch cmd {
				case "serve":
					flags = cli.Serve.runtimeFlags
				case "exporter":
					flags = cli.Exporter.runtimeFlags
				case "bridge":
					flags = cli.Bridge.runtimeFlags
				}
				var set []int
				saved := setGOMAXPROCS
				setGOMAXPROCS = func(n int) int {
					if n > 0 {
						set = append(set, n)
					}
					return 1
				}
				err := flags.apply(slog.New(slog.NewTextHandler(io.Discard, nil)))
				setGOMAXPROCS = saved
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Errorf("%s: error %v, want %q", cmd, err, tc.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", cmd, err)
				}
				switch {
				case tc.want == 0 && len(set) != 0:
					t.Errorf("%s: set GOMAXPROCS to %v, want it left alone", cmd, set)
				case tc.want != 0 && (len(set) != 1 || set[0] != tc.want):
					t.Errorf("%s: set GOMAXPROCS to %v, want [%d]", cmd, set, tc.want)
				}
			}
		})
	}
}
