package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// snippetRE finds docs/python.md's tested code: a python fence between
// <!-- snippet: NAME --> and <!-- /snippet -->.
var snippetRE = regexp.MustCompile("(?s)<!-- snippet: ([a-z-]+) -->\\s*```python\n(.*?)```\\s*<!-- /snippet -->")

// pythonDocSnippets returns docs/python.md's snippets by name.
func pythonDocSnippets(t *testing.T) map[string]string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "python.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range snippetRE.FindAllSubmatch(page, -1) {
		if _, dup := out[string(m[1])]; dup {
			t.Fatalf("docs/python.md: snippet %q twice", m[1])
		}
		out[string(m[1])] = string(m[2])
	}
	for _, name := range []string{"plain-loop", "hf-callback", "lightning-callback"} {
		if out[name] == "" {
			t.Fatalf("docs/python.md has no snippet %q between <!-- snippet: %s --> and <!-- /snippet -->", name, name)
		}
	}
	return out
}

func python3(t *testing.T) string {
	t.Helper()
	return testkit.NeedTool(t, "python3", "python3")
}

// pythonClientDir is the lavender package's directory (python/), for
// PYTHONPATH.
func pythonClientDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// driveResult is what testdata/python/drive.py prints: the phase as the API
// showed it at two steps during training, and the error training raised.
type driveResult struct {
	Probes []*struct {
		Step       *uint64  `json:"step"`
		Total      uint64   `json:"total"`
		ETASeconds *float64 `json:"eta_seconds"`
		PID        int      `json:"pid"`
		Dirs       []string `json:"dirs"`
	} `json:"probes"`
	Error *string `json:"error"`
}

// TestPythonDocSnippets runs docs/python.md's recipes (the context manager
// with a plain loop, the Hugging Face callback with Trainer, SFTTrainer and
// DPOTrainer, the Lightning callback) with python3 and the lavender package
// from python/, against a real exporter, through the framework stand-ins of
// python/tests/frameworks (they call the hooks in the frameworks' order),
// and checks what the exporter recorded.
func TestPythonDocSnippets(t *testing.T) {
	python := python3(t)
	snippets := pythonDocSnippets(t)
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "python.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "pip install ./python") {
		t.Error("docs/python.md does not give the install line `pip install ./python` that python/'s TestPipInstallOffline checks")
	}
	abs := func(parts ...string) string {
		p, err := filepath.Abs(filepath.Join(parts...))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	drive, pkg, frameworks := abs("testdata", "python", "drive.py"), pythonClientDir(t), abs("..", "..", "python", "tests", "frameworks")

	run := func(t *testing.T, snippet, kind, outcome string) (res driveResult, stderr, phases, logDir string) {
		t.Helper()
		dir := t.TempDir()
		file := filepath.Join(dir, "snippet.py")
		if err := os.WriteFile(file, []byte(snippet), 0o644); err != nil {
			t.Fatal(err)
		}
		base, logDir := startExporter(t)
		cmd := exec.Command(python, drive, file, kind, outcome)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LAVENDER_URL="+base, "PYTHONPATH="+pkg+string(os.PathListSeparator)+frameworks,
			"PYTHONDONTWRITEBYTECODE=1")
		var errBuf strings.Builder
		cmd.Stderr = &errBuf
		out, err := cmd.Output()
		wantCode := map[string]int{"ok": 0, "fail": 1}[outcome]
		if code := cmd.ProcessState.ExitCode(); code != wantCode {
			t.Fatalf("python: %v, exit status %d, want %d\n%s%s", err, code, wantCode, out, errBuf.String())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 1 {
			t.Errorf("the snippet printed %q", out)
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			t.Fatalf("drive.py printed %q: %v\n%s", out, err, errBuf.String())
		}
		_, phases = testkit.MustDo(t, nil, "GET", base+"/api/v1/phases", nil, "", "")
		return res, errBuf.String(), phases, logDir
	}

	for _, tc := range []struct {
		snippet, kind, outcome, phase string
		step, total                   uint64 // what the end reports
	}{
		{"plain-loop", "plain", "ok", "Pretrain 1/3", 40, 40},
		{"plain-loop", "plain", "fail", "Pretrain 1/3", 30, 40},
		{"hf-callback", "hf:Trainer", "ok", "Finetune", 40, 40},
		{"hf-callback", "hf:Trainer", "fail", "Finetune", 30, 40},
		{"hf-callback", "hf:SFTTrainer", "ok", "Finetune", 40, 40},
		{"hf-callback", "hf:DPOTrainer", "ok", "Finetune", 40, 40},
		{"lightning-callback", "lightning", "ok", "Pretrain 1/3", 42, 42},
		{"lightning-callback", "lightning", "fail", "Pretrain 1/3", 30, 42},
	} {
		t.Run(tc.kind+"/"+tc.outcome, func(t *testing.T) {
			t.Parallel() // each with its own exporter and directories; python3 starting up is most of it
			res, stderr, phases, logDir := run(t, snippets[tc.snippet], tc.kind, tc.outcome)
			entries := strings.Join(runlogtest.EntriesOf(t, runlogtest.Text(t, logDir)), "\n")
			if stderr != "" {
				t.Errorf("the client wrote to stderr: %q", stderr)
			}
			var resp struct {
				Phases []struct {
					Name   string   `json:"name"`
					Status string   `json:"status"`
					Reason string   `json:"reason"`
					Step   *uint64  `json:"step"`
					Total  uint64   `json:"total"`
					Loss   *float64 `json:"loss"`
				} `json:"phases"`
			}
			if err := json.Unmarshal([]byte(phases), &resp); err != nil || len(resp.Phases) != 1 {
				t.Fatalf("phases: %s (%v)", phases, err)
			}
			p := resp.Phases[0]
			wantStatus, wantEnd, wantReason := "ok", "s", ""
			if tc.outcome == "fail" {
				wantStatus, wantEnd, wantReason = "failed", "s failed: RuntimeError", "RuntimeError: boom: loss is nan"
				if res.Error == nil || !strings.Contains(*res.Error, "boom") {
					t.Errorf("training's error did not propagate: %+v", res.Error)
				}
			} else if res.Error != nil {
				t.Errorf("training raised %q", *res.Error)
			}
			if p.Name != tc.phase || p.Status != wantStatus || p.Reason != wantReason || p.Step == nil || *p.Step != tc.step || p.Total != tc.total {
				t.Errorf("phase after training: %s; want %q %s (%q) at step %d/%d", phases, tc.phase, wantStatus, wantReason, tc.step, tc.total)
			}
			if p.Loss == nil || *p.Loss <= 0 {
				t.Errorf("no loss recorded: %s", phases)
			}
			lines := strings.Split(entries, "\n")
			if len(lines) != 3 || lines[1] != "START "+tc.phase || !strings.HasPrefix(lines[2], "END   "+tc.phase+" ") || !strings.HasSuffix(lines[2], wantEnd) ||
				(wantStatus == "ok" && strings.Contains(lines[2], "failed")) {
				t.Errorf("run log:\n%s\nwant START and END %s", entries, wantStatus)
			}
			// Progress while training: at step 20 the exporter had a step,
			// an ETA, the process and its directories; by step 36 (which a
			// failed run never reaches) the step had advanced.
			wantProbes := 2
			if tc.outcome == "fail" {
				wantProbes = 1
			}
			if len(res.Probes) != wantProbes || res.Probes[0] == nil {
				t.Fatalf("probes %+v, want %d", res.Probes, wantProbes)
			}
			first := res.Probes[0]
			if first.Step == nil || *first.Step == 0 || first.Total != tc.total || first.ETASeconds == nil || *first.ETASeconds <= 0 {
				t.Errorf("while training: step %v/%d ETA %v; want a step, the total and an ETA", first.Step, first.Total, first.ETASeconds)
			}
			if first.PID <= 0 || len(first.Dirs) == 0 {
				t.Errorf("while training: pid %d dirs %v; want the training process and its working directory", first.PID, first.Dirs)
			}
			if wantProbes == 2 {
				if second := res.Probes[1]; second == nil || second.Step == nil || *second.Step <= *first.Step {
					t.Errorf("steps did not advance between the probes: %+v then %+v", first, second)
				}
			}
		})
	}
}
