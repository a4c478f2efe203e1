package app

import (
	"encoding/json"
	"log"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/version"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestApplyRuntime: what reaches runtime.GOMAXPROCS(n > 0) and
// debug.SetGCPercent for each setting, and that a GOGC in the environment
// is left as the runtime applied it.
func TestApplyRuntime(t *testing.T) {
	gogc := func(n int) *int { return &n }
	for _, tc := range []struct {
		name      string
		opts      RuntimeOptions
		envGOGC   string
		wantProcs []int
		wantGOGC  []int
		wantErr   string
	}{
		{name: "GOGC defaults to 75, as Prometheus'", opts: RuntimeOptions{GoMaxProcs: 1}, wantProcs: []int{1}, wantGOGC: []int{75}},
		{name: "both set", opts: RuntimeOptions{GoMaxProcs: 4, GoGC: gogc(120)}, wantProcs: []int{4}, wantGOGC: []int{120}},
		{name: "0 keeps Go's GOMAXPROCS", opts: RuntimeOptions{}, wantGOGC: []int{75}},
		{name: "GOGC from the environment is the runtime's", opts: RuntimeOptions{GoMaxProcs: 2}, envGOGC: "off", wantProcs: []int{2}},
		{name: "an option beats the environment", opts: RuntimeOptions{GoGC: gogc(50)}, envGOGC: "200", wantGOGC: []int{50}},
		{name: "negative GOMAXPROCS", opts: RuntimeOptions{GoMaxProcs: -1, GoGC: gogc(50)}, wantErr: "GoMaxProcs must be 0 (one per CPU) or more, not -1"},
		{name: "GOGC under 1", opts: RuntimeOptions{GoMaxProcs: 1, GoGC: gogc(0)}, wantErr: "GoGC must be at least 1, not 0 (GOGC=off in the environment turns the collector off)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.envGOGC)
			if tc.envGOGC == "" {
				os.Unsetenv("GOGC")
			}
			var procs, percents []int
			savedProcs, savedGC := setGOMAXPROCS, setGCPercent
			t.Cleanup(func() { setGOMAXPROCS, setGCPercent = savedProcs, savedGC })
			setGOMAXPROCS = func(n int) int {
				if n > 0 {
					procs = append(procs, n)
				}
				return 1
			}
			setGCPercent = func(n int) int { percents = append(percents, n); return 100 }
			err := ApplyRuntime(tc.opts, slog.New(slog.DiscardHandler))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				if len(procs)+len(percents) != 0 {
					t.Errorf("changed the runtime (%v, %v) despite the error", procs, percents)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(procs, tc.wantProcs) || !slices.Equal(percents, tc.wantGOGC) {
				t.Errorf("GOMAXPROCS set to %v and GOGC to %v, want %v and %v", procs, percents, tc.wantProcs, tc.wantGOGC)
			}
		})
	}
}

// TestVersionText: the report prints what the build stamped and leaves out
// what it did not, never an empty or "unknown" value.
func TestVersionText(t *testing.T) {
	saved := []string{version.Version, version.Branch, version.Revision, version.BuildUser, version.BuildDate}
	t.Cleanup(func() {
		version.Version, version.Branch, version.Revision, version.BuildUser, version.BuildDate = saved[0], saved[1], saved[2], saved[3], saved[4]
	})
	for _, tc := range []struct {
		name                                   string
		branch, revision, buildUser, buildDate string
		settings                               map[string]string
		want, notWant                          []string
	}{
		{name: "a plain go build", settings: map[string]string{},
			want:    []string{"lavender, version 9.9.9\n", "go version:", "platform:"},
			notWant: []string{"(", "build user", "build date", "commit date", "unknown"}},
		{name: "VCS stamp", settings: map[string]string{"vcs.revision": "0123abc", "vcs.time": "2026-12-01T10:00:00Z"},
			want:    []string{"\n  commit date:      2026-12-01T10:00:00Z"},
			notWant: []string{"build user", "build date"}},
		{name: "stamped by the release build", branch: "main", revision: "deadbeef", buildUser: "ci@builder", buildDate: "20261201-10:00:00",
			settings: map[string]string{},
			want: []string{"lavender, version 9.9.9 (branch: main, revision: deadbeef)\n", "\n  build user:       ci@builder",
				"\n  build date:       20261201-10:00:00"}},
		{name: "unknown stamps are left out", revision: "unknown", buildUser: "unknown", settings: map[string]string{},
			notWant: []string{"unknown", "(", "build user"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version.Version, version.Branch, version.Revision, version.BuildUser, version.BuildDate = "9.9.9", tc.branch, tc.revision, tc.buildUser, tc.buildDate
			got := versionText(tc.settings)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("report lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("report holds %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestNewLogger: level and format are promslog's, bad ones are refused,
// and every line is scrubbed of secret-shaped text, whoever wrote it.
func TestNewLogger(t *testing.T) {
	const apnsToken = "5f1c0e9a7b3d2c4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"
	const ntfyToken = "tk_agqdq7mvbofd37zqvn29rhumzniz2"
	for _, tc := range []struct{ level, format, wantErr string }{
		{level: "loud", format: "logfmt", wantErr: "loud"},
		{level: "info", format: "xml", wantErr: "xml"},
	} {
		if _, err := NewLogger(tc.level, tc.format, os.Stderr); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("NewLogger(%q, %q): error %v, want one naming %q", tc.level, tc.format, err, tc.wantErr)
		}
	}
	var buf testkit.SyncBuffer
	logger, err := NewLogger("info", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	logger.Debug("not at info")
	logger.Warn("push failed", "err", "Post https://api.push.apple.com/3/device/"+apnsToken+": EOF", "auth", "Bearer "+ntfyToken)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want the warning alone, got %d lines:\n%s", len(lines), buf.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, lines[0])
	}
	if line["msg"] != "push failed" || line["level"] != "WARN" {
		t.Errorf("line %v, want msg \"push failed\" at warn", line)
	}
	for _, leak := range []string{apnsToken, ntfyToken} {
		if strings.Contains(lines[0], leak) {
			t.Errorf("log holds %q: %s", leak, lines[0])
		}
	}
}

// TestRouteStdLog: the standard log package, where net/http speaks, goes
// through the scrubbing logger until restored.
func TestRouteStdLog(t *testing.T) {
	const apnsToken = "5f1c0e9a7b3d2c4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"
	var routed, before testkit.SyncBuffer
	log.SetOutput(&before)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	logger, err := NewLogger("info", "logfmt", &routed)
	if err != nil {
		t.Fatal(err)
	}
	restore := RouteStdLog(logger)
	log.Printf("http: Unsolicited response starting with %q", "/3/device/"+apnsToken)
	restore()
	log.Print("after restore")
	if got := routed.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "Unsolicited response") || strings.Contains(got, apnsToken) {
		t.Errorf("routed log %q, want the line at warn, scrubbed", got)
	}
	if got := before.String(); !strings.Contains(got, "after restore") || strings.Contains(got, "Unsolicited") {
		t.Errorf("standard log after restore %q, want only the later line", got)
	}
}
