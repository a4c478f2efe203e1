package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

func TestPhaseRunParsesCommand(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		every time.Duration
		want  string
	}{
		{[]string{"phase", "run", "Train", "--", "python", "train.py", "--every", "5"}, 60 * time.Second, "python|train.py|--every|5"},
		{[]string{"phase", "run", "--every", "2s", "Train", "--", "sh", "-c", "exit 3"}, 2 * time.Second, "sh|-c|exit 3"},
		{[]string{"phase", "run", "Train", "--every=30s", "--", "--weird-name"}, 30 * time.Second, "--weird-name"},
	} {
		cli := parseCLI(t, tc.args...)
		c := cli.Phase.Run
		cmd := c.Command
		if len(cmd) > 0 && cmd[0] == "--" {
			cmd = cmd[1:]
		}
		if got := strings.Join(cmd, "|"); got != tc.want || c.Every != tc.every || c.Name != "Train" {
			t.Errorf("%q: command %q every %s name %q; want %q every %s", tc.args, got, c.Every, c.Name, tc.want, tc.every)
		}
	}
}

func TestPhaseRunCommand(t *testing.T) {
	t.Parallel()
	base, logDir := startExporter(t)
	var stdout, stderr testkit.SyncBuffer
	cli := parseCLI(t, "phase", "run", "Train 1/2", "--every", "10ms", "--url", base, "--",
		"sh", "-c", `read line; echo "got $line"; echo oops >&2; exit 7`)
	code, err := cli.Phase.Run.run(context.Background(), testGlobals(&stdout, &stderr), strings.NewReader("batch\n"), nil)
	if err != nil || code != 7 {
		t.Fatalf("run = %d, %v; want the child's 7", code, err)
	}
	if stdout.String() != "got batch\n" || !strings.Contains(stderr.String(), "oops") {
		t.Errorf("streams: stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if strings.Contains(stderr.String(), "level=WARN") {
		t.Errorf("warnings with a reachable exporter: %s", stderr.String())
	}
	_, body := testkit.MustDo(t, nil, "GET", base+"/api/v1/phases", nil, "", "")
	if !strings.Contains(body, `"name":"Train 1/2","status":"failed"`) || !strings.Contains(body, `"reason":"exit code 7: oops"`) {
		t.Errorf("phases: %s", body)
	}
	entries := runlogtest.EntriesOf(t, runlogtest.Text(t, logDir))
	if len(entries) != 3 || entries[1] != "START Train 1/2" || !strings.HasPrefix(entries[2], "END   Train 1/2 ") || !strings.HasSuffix(entries[2], "s failed: exit code 7: oops") {
		t.Errorf("run log entries %q", entries)
	}
}

// With no exporter listening the command still runs, and its exit code
// still comes back; the wrapper warns once.
func TestPhaseRunWithoutExporter(t *testing.T) {
	var stdout, stderr testkit.SyncBuffer
	cli := parseCLI(t, "phase", "run", "Train", "--every", "5ms", "--url", "http://127.0.0.1:1", "--",
		"sh", "-c", "sleep 0.1; echo done")
	code, err := cli.Phase.Run.run(context.Background(), testGlobals(&stdout, &stderr), nil, nil)
	if err != nil || code != 0 || stdout.String() != "done\n" {
		t.Fatalf("run = %d, %v, stdout %q", code, err, stdout.String())
	}
	if n := strings.Count(stderr.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, stderr.String())
	}
}

// start, ping and end carry --step and --total (or LAVENDER_PHASE_STEP and
// LAVENDER_PHASE_TOTAL); the exporter's refusal of a step past the total
// given with it comes back as the command's error. A step alone past the
// phase's total drops that total; an end with a step past its own total is
// recorded without them, and the command prints the exporter's warning and
// succeeds.
func TestPhaseProgressFlags(t *testing.T) {
	base, _ := startExporter(t)
	g := testGlobals(io.Discard, io.Discard)
	if err := parseCLI(t, "phase", "start", "Train", "--url", base, "--step", "0", "--total", "500").Phase.Start.Run(g); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LAVENDER_PHASE_STEP", "120")
	if err := parseCLI(t, "phase", "ping", "Train", "--url", base).Phase.Ping.Run(g); err != nil {
		t.Fatal(err)
	}
	_, body := testkit.MustDo(t, nil, "GET", base+"/api/v1/phases", nil, "", "")
	if !strings.Contains(body, `"step":120,"total":500`) {
		t.Errorf("phases after ping: %s", body)
	}
	err := parseCLI(t, "phase", "ping", "Train", "--url", base, "--step", "501", "--total", "500").Phase.Ping.Run(g)
	if err == nil || !strings.Contains(err.Error(), "step 501 is past the total of 500") {
		t.Errorf("step past total: %v", err)
	}
	if err := parseCLI(t, "phase", "ping", "Train", "--url", base, "--total", "0").Phase.Ping.Run(g); err == nil || !strings.Contains(err.Error(), "--total must be 1 or more") {
		t.Errorf("--total 0: %v", err)
	}
	if err := parseCLI(t, "phase", "ping", "Train", "--url", base, "--step", "510").Phase.Ping.Run(g); err != nil {
		t.Fatalf("step alone past the total: %v", err)
	}
	_, body = testkit.MustDo(t, nil, "GET", base+"/api/v1/phases", nil, "", "")
	if !strings.Contains(body, `"step":510,"last_progress"`) {
		t.Errorf("phases after a step past the total: %s; want step 510 and no total", body)
	}
	var stderr bytes.Buffer
	if err := parseCLI(t, "phase", "end", "Train", "--url", base, "--step", "600", "--total", "550").Phase.End.Run(testGlobals(io.Discard, &stderr)); err != nil {
		t.Fatal(err)
	}
	if want := "lavender: warning: end recorded without its step and total (bad progress: step 600 is past the total of 550)\n"; stderr.String() != want {
		t.Errorf("end's stderr %q, want %q", stderr.String(), want)
	}
	_, body = testkit.MustDo(t, nil, "GET", base+"/api/v1/phases", nil, "", "")
	if !strings.Contains(body, `"status":"ok"`) || !strings.Contains(body, `"step":510`) {
		t.Errorf("phases after end: %s", body)
	}
}
