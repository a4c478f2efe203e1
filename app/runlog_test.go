package app

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/runlog"
)

// TestRunlogCommands: new prints the new run's path, appends past the cap
// compact the file, show prints it and path prints the same path.
func TestRunlogCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	o := RunlogOptions{Dir: dir, MaxBytes: runlog.DefaultMaxBytes}
	env := Env{Logger: slog.New(slog.DiscardHandler)}
	var out bytes.Buffer
	if err := NewRun(o, "device=cuda lavender_2=v0.2.3", env, &out); err != nil {
		t.Fatal(err)
	}
	path := strings.TrimSpace(out.String())
	if filepath.Dir(path) != dir || !strings.HasPrefix(filepath.Base(path), "run-") {
		t.Fatalf("NewRun printed %q, want a run file in %s", out.String(), dir)
	}
	for i := range 60 { // well past the 1 KB cap: the file must compact
		if err := AppendToRun(o, fmt.Sprintf("START Pretrain %d/60", i+1), env); err != nil {
			t.Fatal(err)
		}
	}
	var shownBuf bytes.Buffer
	if err := ShowRun(dir, env, &shownBuf); err != nil {
		t.Fatal(err)
	}
	shown := shownBuf.String()
	if len(shown) > runlog.DefaultMaxBytes {
		t.Errorf("60 appends left %d bytes, over the cap", len(shown))
	}
	f, err := runlog.Parse([]byte(shown))
	if err != nil {
		t.Fatalf("%v\n%s", err, shown)
	}
	if f.Header[1] != "# device=cuda lavender_2=v0.2.3" || !strings.HasSuffix(f.First, " RUN start") || f.Marker == nil {
		t.Errorf("unexpected shape:\n%s", shown)
	}
	if all := f.AllEntries(); !strings.HasSuffix(all[len(all)-1], " START Pretrain 60/60") {
		t.Errorf("newest entry %q", all[len(all)-1])
	}
	var p bytes.Buffer
	if err := PrintRunPath(dir, &p); err != nil || strings.TrimSpace(p.String()) != path {
		t.Errorf("PrintRunPath printed %q (%v), want %q", p.String(), err, path)
	}
}
