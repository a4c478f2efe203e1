package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/barktest"
)

// TestFlagErrorsNameTheFlag: a bad flag value is reported by
// the flag's name, never by the internal package that would reject it
// (`watchdog: threshold 1.5 …`, `exporter: run-log max bytes …`).
func TestFlagErrorsNameTheFlag(t *testing.T) {
	logs := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--watchdog.threshold=1.5"}, "--watchdog.threshold must be in (0, 1], not 1.5"},
		{[]string{"serve", "--watchdog.hysteresis=0.6"}, "--watchdog.hysteresis must be in [0, --watchdog.threshold 0.5), not 0.6"},
		{[]string{"serve", "--watchdog.repeat=-1s"}, "--watchdog.repeat must not be negative, not -1s"},
		{[]string{"serve", "--runlog.max-bytes=100"}, "--runlog.max-bytes must be at least 256, not 100"},
		{[]string{"exporter", "--runlog.max-bytes=100"}, "--runlog.max-bytes must be at least 256, not 100"},
		{[]string{"bridge", "--runlog.max-bytes=100"}, "--runlog.max-bytes must be at least 256, not 100"},
		{[]string{"runlog", "append", "--runlog.max-bytes=100", "x"}, "--runlog.max-bytes must be at least 256, not 100"},
		{[]string{"phase", "start", "X", "--url=ftp://x"}, `--url: exporter URL "ftp://x": the scheme must be http or https`},
	} {
		args := append(tc.args, "--runlog.dir="+logs, "--web.listen-address=127.0.0.1:0")
		if tc.args[0] == "phase" {
			args = tc.args
		} else if tc.args[0] == "runlog" {
			args = append(tc.args, "--runlog.dir="+logs)
		}
		_, _, err := runCLI(t, args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("lavender %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestPhaseErrorWithoutBody: an exporter (or a proxy in front of it) that
// answers an error with an empty body gives a message without a dangling
// colon (not `exporter answered 404 Not Found: `).
func TestPhaseErrorWithoutBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	_, _, err := runCLI(t, "phase", "start", "X", "--url="+srv.URL)
	if err == nil || err.Error() != "exporter answered 404 Not Found" {
		t.Errorf("phase start = %v, want exactly %q", err, "exporter answered 404 Not Found")
	}
}

// TestBarkCheckPlurals: one target in one file is `1 Bark target in 1 file`,
// not `1 Bark targets in 1 files`.
func TestBarkCheckPlurals(t *testing.T) {
	for _, tc := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"a.bark.env": "https://api.day.app/K/$0\n"}, "1 Bark target in 1 file\n"},
		{map[string]string{"a.bark.env": "https://api.day.app/K/$0\n", "b.bark.env": "https://api.day.app/L/$0\n"}, "2 Bark targets in 2 files\n"},
	} {
		out, _, err := runCLI(t, "bark", "check", "--bark.config-dir", barktest.ConfigDir(t, tc.files))
		if err != nil || !strings.HasSuffix(out, tc.want) {
			t.Errorf("bark check: %q, %v; want it to end with %q", out, err, tc.want)
		}
	}
}

// TestFlagsBelongToTheirCommands: the phase commands' and
// runlog new's environment variables say what they belong to (a stray
// LAVENDER_FAILED or LAVENDER_TIMEOUT in a training job's environment no
// longer marks phases failed or changes timeouts), and commands list only
// the flags they use.
func TestFlagsBelongToTheirCommands(t *testing.T) {
	t.Run("environment", func(t *testing.T) {
		for _, generic := range []string{"LAVENDER_FAILED", "LAVENDER_TIMEOUT", "LAVENDER_EVERY", "LAVENDER_HEADER"} {
			t.Setenv(generic, "garbage")
		}
		cli := parseCLI(t, "phase", "end", "X")
		if cli.Phase.End.Failed || cli.Phase.End.Timeout.String() != "10s" {
			t.Errorf("generic variables still read: failed=%v timeout=%s", cli.Phase.End.Failed, cli.Phase.End.Timeout)
		}
		if cli := parseCLI(t, "runlog", "new"); cli.Runlog.New.Header != "" {
			t.Errorf("LAVENDER_HEADER still read: %q", cli.Runlog.New.Header)
		}

		t.Setenv("LAVENDER_PHASE_FAILED", "true")
		t.Setenv("LAVENDER_PHASE_TIMEOUT", "3s")
		t.Setenv("LAVENDER_PHASE_EVERY", "7s")
		t.Setenv("LAVENDER_RUNLOG_HEADER", "device=cuda")
		if cli := parseCLI(t, "phase", "end", "X"); !cli.Phase.End.Failed || cli.Phase.End.Timeout.String() != "3s" {
			t.Errorf("LAVENDER_PHASE_*: failed=%v timeout=%s", cli.Phase.End.Failed, cli.Phase.End.Timeout)
		}
		if cli := parseCLI(t, "phase", "run", "X", "--", "true"); cli.Phase.Run.Every.String() != "7s" {
			t.Errorf("LAVENDER_PHASE_EVERY: every=%s", cli.Phase.Run.Every)
		}
		if cli := parseCLI(t, "runlog", "new"); cli.Runlog.New.Header != "device=cuda" {
			t.Errorf("LAVENDER_RUNLOG_HEADER: %q", cli.Runlog.New.Header)
		}
	})
	t.Run("help", func(t *testing.T) {
		for _, tc := range []struct {
			cmd           []string
			want, notWant string
		}{
			{[]string{"bark", "check"}, "--bark.config-dir", "--bark.timeout"},
			{[]string{"bark", "send"}, "--bark.timeout", ""},
			{[]string{"runlog", "show"}, "--runlog.dir", "--runlog.max-bytes"},
			{[]string{"runlog", "path"}, "--runlog.dir", "--runlog.max-bytes"},
			{[]string{"runlog", "append"}, "--runlog.max-bytes", ""},
			{[]string{"phase", "end"}, "LAVENDER_PHASE_FAILED", "LAVENDER_FAILED"},
			{[]string{"phase", "run"}, "LAVENDER_PHASE_EVERY", "LAVENDER_EVERY"},
			{[]string{"phase", "ping"}, "LAVENDER_PHASE_TIMEOUT", "LAVENDER_TIMEOUT"},
			{[]string{"runlog", "new"}, "LAVENDER_RUNLOG_HEADER", "$LAVENDER_HEADER"},
		} {
			out, _, err := runCLI(t, append(tc.cmd, "--help")...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) || (tc.notWant != "" && strings.Contains(out, tc.notWant)) {
				t.Errorf("lavender %s --help: want %q and not %q in\n%s", strings.Join(tc.cmd, " "), tc.want, tc.notWant, out)
			}
		}
	})
}
