package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"lavender/internal/runlogtest"
	"lavender/internal/testkit"
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
	for _, name := range []string{"client", "plain-loop", "hf-callback", "lightning-callback"} {
		if out[name] == "" {
			t.Fatalf("docs/python.md has no snippet %q between <!-- snippet: %s --> and <!-- /snippet -->", name, name)
		}
	}
	return out
}

func python3(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err == nil {
		return python
	}
	if os.Getenv("LAVENDER_E2E") == "1" {
		t.Fatal("no python3 on PATH and LAVENDER_E2E=1: install Debian's python3")
	}
	t.Skip("no python3 on PATH; install it, or set LAVENDER_E2E=1 to make this a failure")
	return ""
}

// driveResult is what testdata/python/drive.py prints: the phase as the API
// showed it at two steps during training, and the error training raised.
type driveResult struct {
	Probes []*struct {
		Step       *uint64 `json:"step"`
		Total      uint64  `json:"total"`
		ETASeconds float64 `json:"eta_seconds"`
	} `json:"probes"`
	Error *string `json:"error"`
}

// TestPythonDocSnippets runs docs/python.md's Python recipes (the context
// manager with a plain loop, the Hugging Face callback with Trainer,
// SFTTrainer and DPOTrainer, the Lightning callback) with python3 against
// a real exporter, through stand-in frameworks that call the hooks in their
// order, and checks what the exporter recorded.
func TestPythonDocSnippets(t *testing.T) {
	python := python3(t)
	snippets := pythonDocSnippets(t)
	stubs, err := filepath.Abs(filepath.Join("testdata", "python"))
	if err != nil {
		t.Fatal(err)
	}
	header := `{"Content-Type": "application/json"}`
	if !strings.Contains(snippets["client"], header) {
		t.Fatalf("docs/python.md's client no longer sets %s; the API refuses urllib's default type with 415", header)
	}

	// run writes the client as lavender_phase.py and the snippet beside it,
	// and drives the snippet against a fresh exporter.
	run := func(t *testing.T, client, snippet, kind, outcome string) (res driveResult, printed, phases, logDir string) {
		t.Helper()
		dir := t.TempDir()
		for name, code := range map[string]string{"lavender_phase.py": client, "snippet.py": snippet} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(code), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		base, logDir := startExporter(t)
		phases, printed = "", ""
		cmd := exec.Command(python, filepath.Join(stubs, "drive.py"), filepath.Join(dir, "snippet.py"), kind, outcome)
		cmd.Env = append(os.Environ(), "LAVENDER_URL="+base, "PYTHONPATH="+dir+string(os.PathListSeparator)+stubs,
			"PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("python: %v\n%s%s", err, out, stderr)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			t.Fatalf("drive.py printed %q: %v", out, err)
		}
		_, phases = testkit.MustDo(t, nil, "GET", base+"/api/v1/phases", nil, "", "")
		return res, strings.Join(lines[:len(lines)-1], "\n"), phases, logDir
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
			res, printed, phases, logDir := run(t, snippets["client"], snippets[tc.snippet], tc.kind, tc.outcome)
			entries := strings.Join(runlogtest.EntriesOf(t, runlogtest.Text(t, logDir)), "\n")
			if printed != "" {
				t.Errorf("the snippet printed %q", printed)
			}
			var resp struct {
				Phases []struct {
					Name   string  `json:"name"`
					Status string  `json:"status"`
					Step   *uint64 `json:"step"`
					Total  uint64  `json:"total"`
				} `json:"phases"`
			}
			if err := json.Unmarshal([]byte(phases), &resp); err != nil || len(resp.Phases) != 1 {
				t.Fatalf("phases: %s (%v)", phases, err)
			}
			p := resp.Phases[0]
			wantStatus, wantEnd := "ok", "s"
			if tc.outcome == "fail" {
				wantStatus, wantEnd = "failed", "s failed"
				if res.Error == nil || !strings.Contains(*res.Error, "boom") {
					t.Errorf("training's error did not propagate: %+v", res.Error)
				}
			} else if res.Error != nil {
				t.Errorf("training raised %q", *res.Error)
			}
			if p.Name != tc.phase || p.Status != wantStatus || p.Step == nil || *p.Step != tc.step || p.Total != tc.total {
				t.Errorf("phase after training: %s; want %q %s at step %d/%d", phases, tc.phase, wantStatus, tc.step, tc.total)
			}
			lines := strings.Split(entries, "\n")
			if len(lines) != 3 || lines[1] != "START "+tc.phase || !strings.HasPrefix(lines[2], "END   "+tc.phase+" ") || !strings.HasSuffix(lines[2], wantEnd) ||
				(wantStatus == "ok" && strings.HasSuffix(lines[2], "failed")) {
				t.Errorf("run log:\n%s\nwant START and END %s", entries, wantStatus)
			}
			// Progress while training: at step 20 the exporter had a step
			// and an ETA; by step 36 (which a failed run never reaches) the
			// step had advanced.
			wantProbes := 2
			if tc.outcome == "fail" {
				wantProbes = 1
			}
			if len(res.Probes) != wantProbes || res.Probes[0] == nil {
				t.Fatalf("probes %+v, want %d", res.Probes, wantProbes)
			}
			first := res.Probes[0]
			if first.Step == nil || *first.Step == 0 || first.Total != tc.total || first.ETASeconds <= 0 {
				t.Errorf("while training: step %v/%d ETA %v; want a step, the total and an ETA", first.Step, first.Total, first.ETASeconds)
			}
			if wantProbes == 2 {
				if second := res.Probes[1]; second == nil || second.Step == nil || *second.Step <= *first.Step {
					t.Errorf("steps did not advance between the probes: %+v then %+v", first, second)
				}
			}
		})
	}

	// Without the header urllib's default type is refused, and the client
	// says so and carries on.
	t.Run("no Content-Type", func(t *testing.T) {
		client := strings.Replace(snippets["client"], header, "{}", 1)
		_, printed, phases, _ := run(t, client, snippets["plain-loop"], "plain", "ok")
		if !strings.Contains(printed, "HTTP Error 415") || strings.Contains(phases, "Pretrain") {
			t.Errorf("without Content-Type: printed %q, phases %s", printed, phases)
		}
	})
}
