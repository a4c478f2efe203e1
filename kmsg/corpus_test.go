package kmsg

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// describe writes a fault on one line, every field that is set.
func describe(f Fault) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", f.Kind)
	add := func(k, v string) {
		if v != "" && v != "0" {
			fmt.Fprintf(&b, " %s=%q", k, v)
		}
	}
	add("gpu", f.GPU)
	add("instance", f.Instance)
	add("xid", fmt.Sprint(f.Xid))
	add("pid", fmt.Sprint(f.PID))
	add("name", f.Name)
	add("device", f.Device)
	add("storage", string(f.Storage))
	if a, ok := ActionOf(f); ok {
		add("action", string(a))
	}
	add("message", f.Message)
	return b.String()
}

// TestCorpus parses every line of testdata/corpus.kmsg, real-format records
// of every form lavender reads and near misses that must not match, and
// compares what each line gave with testdata/corpus.golden (go test
// ./kmsg -run TestCorpus -update rewrites it).
func TestCorpus(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "corpus.kmsg"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var p Parser
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, " ") {
			continue // a dictionary line of the record above
		}
		rec, ok := ParseRecord([]byte(line))
		switch f, found := p.Parse(rec); {
		case !ok:
			fmt.Fprintf(&out, "not a record: %.40q\n", line)
		case !rec.Kernel():
			fmt.Fprintf(&out, "%d facility %d: ignored\n", rec.Seq, rec.Facility)
		case found:
			fmt.Fprintf(&out, "%d %s\n", rec.Seq, describe(f))
		default:
			fmt.Fprintf(&out, "%d -\n", rec.Seq)
		}
	}
	golden := filepath.Join("testdata", "corpus.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got := out.String(); got != string(want) {
		t.Errorf("corpus parsed differently from %s:\n%s", golden, lineDiff(string(want), got))
	}
}

func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d\n  want %s\n  got  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
