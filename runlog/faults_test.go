package runlog

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAppendOnAFullDisk: on a full file system an append fails with an
// error (the caller counts and logs it) and the file on disk stays whole
// and within the cap, so the record resumes once space is back.
func TestAppendOnAFullDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(dir, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	opts := Options{Dir: dir}
	l, err := Start(opts, "full disk", RunStart)
	if err != nil {
		t.Fatal(err)
	}
	filler, _ := os.Create(filepath.Join(dir, "filler"))
	for {
		if _, err := filler.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	filler.Close()
	failures := 0
	for i := range 60 {
		if err := l.Append(strings.Repeat("entry ", 5) + string(rune('a'+i%26))); err != nil {
			failures++
			if !strings.Contains(err.Error(), "no space left") {
				t.Errorf("append %d: %v", i, err)
			}
		}
		data, err := os.ReadFile(l.Path())
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > DefaultMaxBytes {
			t.Fatalf("%d bytes, over the cap", len(data))
		}
		if _, err := Parse(data); err != nil {
			t.Fatalf("after append %d on a full disk: %v\n%s", i, err, data)
		}
	}
	if failures == 0 {
		t.Fatal("no append failed on a full disk: the test proved nothing")
	}
	os.Remove(filepath.Join(dir, "filler"))
	if err := l.Append("space is back"); err != nil {
		t.Fatalf("append after space came back: %v", err)
	}
	if data, _ := os.ReadFile(l.Path()); !strings.HasSuffix(string(data), " space is back\n") {
		t.Errorf("the record did not resume:\n%s", data)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*"))
	if len(leftovers) != 0 {
		t.Errorf("failed compactions left temp files: %v", leftovers)
	}
}
