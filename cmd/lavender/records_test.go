package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestServeResumeWritesRunResume: serve --run.resume says in the run log
// that it came back, so entries after a RUN stop are not a mystery.
func TestServeResumeWritesRunResume(t *testing.T) {
	t.Parallel()
	logDir := filepath.Join(t.TempDir(), "logs")
	barkDir := t.TempDir()
	began := time.Now()
	for _, step := range []struct {
		args  []string
		event string
	}{
		{testkit.QuietServeArgs(t, barkDir, logDir), `{"phase":"SFT","event":"start"}`},
		{testkit.QuietServeArgs(t, barkDir, logDir, "--run.resume"), `{"phase":"SFT","event":"end"}`},
	} {
		// In-process, so the phase lasts only as long as two starts and
		// stops: the END line's duration, counted from the START before
		// the restart, is at most the test's own time.
		serve := startInProcess(t, nil, step.args...)
		if code, body := testkit.MustDo(t, nil, "POST", serve.base+"/api/v1/heartbeat", []byte(step.event), "", ""); code != 200 {
			t.Fatalf("%s: %d %s", step.event, code, body)
		}
		if err := serve.stop(); err != nil {
			t.Fatal(err)
		}
	}
	got := runlogtest.EntriesOf(t, runlogtest.Text(t, logDir))
	device := strings.TrimPrefix(got[0], "RUN start  ")
	end := ""
	if len(got) == 6 {
		end = got[4]
	}
	var lasted int
	if _, err := fmt.Sscanf(end, "END   SFT %ds", &lasted); err != nil || end != fmt.Sprintf("END   SFT %ds", lasted) ||
		time.Duration(lasted)*time.Second > time.Since(began)+time.Second {
		t.Errorf("END line %q: want END   SFT <seconds since the first START>s (at most %s)", end, time.Since(began).Round(time.Second))
	}
	want := []string{"RUN start  " + device, "START SFT", "RUN stop", "RUN resume  " + device, end, "RUN stop"}
	if device == got[0] || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("run log\n%q\nwant\n%q", got, want)
	}
}
