package app

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/kmsg"
)

// setBootID writes the fake procfs's boot id.
func setBootID(t *testing.T, procfs *testkit.Procfs, id string) {
	t.Helper()
	dir := filepath.Join(procfs.Dir, "sys", "kernel", "random")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "boot_id"), []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readPosition(t *testing.T, dir string) kernelLogPositionFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, KernelLogPositionFileName))
	if err != nil {
		t.Fatalf("no kernel log position saved: %v", err)
	}
	var f kernelLogPositionFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return f
}

func (s *served) kernelRecords() float64 {
	return testkit.Scrape(s.t, nil, s.base+"/metrics").MustValue(s.t, "lavender_kernel_log_records_total", nil)
}

// serve restarted on the same boot reads the kernel log on from the last
// record the run before read, so what was logged while it was down is read
// (a fault among it is pushed); restarted after a reboot, it starts at the
// log's end. The real /dev/kmsg, where the machine lets the test read and
// write it: no other file is the kernel log device, and a record a process
// writes is never a fault, so the records are counted, not pushed.
func TestRestartReadsTheKernelLogOnFromWhereItStopped(t *testing.T) {
	r, err := kmsg.Open(kmsg.DefaultPath)
	if err != nil {
		t.Skipf("kernel log not readable here: %v", err)
	}
	r.Close()
	w, err := os.OpenFile(kmsg.DefaultPath, os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("kernel log not writable here: %v", err)
	}
	defer w.Close()
	logLines := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := fmt.Fprintf(w, "lavender-test %s %d\n", t.Name(), i); err != nil {
				t.Fatal(err)
			}
		}
	}

	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.10)})
	setBootID(t, procfs, "5c3a6f0e-0000-4000-8000-000000000001")
	rig := newRestartRig(t, procfs, nil, time.Hour)
	rig.kmsg = kmsg.DefaultPath
	a := rig.start()
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	first := readPosition(t, rig.logDir)
	if first.BootID != "5c3a6f0e-0000-4000-8000-000000000001" {
		t.Errorf("position saved with boot id %q", first.BootID)
	}

	logLines(3) // while serve is down
	b := rig.start()
	testkit.WaitFor(t, 20*time.Second, func() bool { return b.kernelRecords() >= 3 }, "the 3 records logged while serve was down, read")
	if !strings.Contains(b.logs.String(), "kernel log read on from where the last run of serve stopped") {
		t.Errorf("the resume is not logged:\n%s", b.logs)
	}
	// Saved while serve runs, as a crash would leave it, once the records
	// moved the position: no stop needed.
	testkit.WaitFor(t, 20*time.Second, func() bool { return readPosition(t, rig.logDir).Seq >= first.Seq+3 }, "the position saved while serve runs")
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	if second := readPosition(t, rig.logDir); second.Seq < first.Seq+3 {
		t.Errorf("position %d after the restart; want at least %d", second.Seq, first.Seq+3)
	}

	// A reboot: the position is of another boot.
	setBootID(t, procfs, "5c3a6f0e-0000-4000-8000-000000000002")
	logLines(3)
	c := rig.start()
	if !strings.Contains(c.logs.String(), "kernel log position is of another boot") {
		t.Errorf("the other boot is not logged:\n%s", c.logs)
	}
	if strings.Contains(c.logs.String(), "read on from where") {
		t.Errorf("read on after a position of another boot:\n%s", c.logs)
	}
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	if got := readPosition(t, rig.logDir).BootID; got != "5c3a6f0e-0000-4000-8000-000000000002" {
		t.Errorf("position saved with boot id %q, want the new boot's", got)
	}
}

// A damaged position file is moved aside and logged, and serve starts; a
// kernel log that is a file (or FIFO) has no position, and none is saved.
func TestDamagedKernelLogPositionIsMovedAside(t *testing.T) {
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.10)})
	setBootID(t, procfs, "5c3a6f0e-0000-4000-8000-000000000001")
	rig := newRestartRig(t, procfs, nil, time.Hour)
	rig.kmsg = filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(rig.kmsg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(rig.logDir, KernelLogPositionFileName)
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := rig.start()
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.logs.String(), "kernel log position damaged") {
		t.Errorf("nothing logged of the damaged file:\n%s", s.logs)
	}
	if data, err := os.ReadFile(path + ".damaged"); err != nil || string(data) != "{not json" {
		t.Errorf("the damaged file was not kept aside: %q, %v", data, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a position was saved for a kernel log that is a file: %v", err)
	}
}
