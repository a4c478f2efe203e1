package kmsg

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// TestVictim feeds a fake kernel log: records from before the reader opened
// are ignored, both of the kernel's record forms name the victim, and a
// kill's two records are one victim.
func TestVictim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	old := "6,100,5000,-;Out of memory: Killed process 111 (old-run) total-vm:1kB, anon-rss:1kB\n"
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if v := r.Victim(); v != (OOMVictim{}) {
		t.Fatalf("a kill from before the start is named: %+v", v)
	}

	appendFile(t, path, "4,200,6000,-;python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0\n"+
		" SUBSYSTEM=memory\n"+
		"6,201,6001,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=python3,pid=4242,uid=1000\n")
	want := OOMVictim{PID: 4242, Name: "python3", Seq: 201}
	if v := r.Victim(); v != want {
		t.Fatalf("after the oom-kill record: %+v; want %+v", v, want)
	}
	appendFile(t, path, "3,202,6002,-;Out of memory: Killed process 4242 (python3) total-vm:9000000kB, anon-rss:8000000kB, file-rss:0kB\n")
	if v := r.Victim(); v != want {
		t.Errorf("the kill's second record made a new victim: %+v", v)
	}

	// A cgroup kill, split across two writes mid-line.
	appendFile(t, path, "3,310,7000,-;Memory cgroup out of memory: Killed process 77 (data loader")
	if v := r.Victim(); v != want {
		t.Errorf("half a record changed the victim: %+v", v)
	}
	appendFile(t, path, ") total-vm:1kB\n")
	if v := r.Victim(); v != (OOMVictim{PID: 77, Name: "data loader", Seq: 310}) {
		t.Errorf("cgroup kill: %+v", v)
	}
	// A userspace write naming a victim is no kill.
	appendFile(t, path, "11,311,7001,-;Out of memory: Killed process 66 (forged) total-vm:1kB\n")
	if v := r.Victim(); v.PID == 66 {
		t.Errorf("a facility-1 record named a victim: %+v", v)
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "none"))
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("open of a missing log: %v", err)
	}
}

// collector gathers what Run hands its handler.
type collector struct {
	mu     sync.Mutex
	faults []Fault
	calls  int
	got    chan struct{}
}

func newCollector() *collector { return &collector{got: make(chan struct{}, 1)} }

func (c *collector) handle(fs []Fault) {
	c.mu.Lock()
	c.faults = append(c.faults, fs...)
	c.calls++
	c.mu.Unlock()
	select {
	case c.got <- struct{}{}:
	default:
	}
}

func (c *collector) wait(t *testing.T, n int) []Fault {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		if len(c.faults) >= n {
			out := append([]Fault(nil), c.faults...)
			c.mu.Unlock()
			return out
		}
		c.mu.Unlock()
		select {
		case <-c.got:
		case <-deadline:
			t.Fatalf("waited for %d faults, have %d", n, len(c.faults))
		}
	}
}

func runReader(t *testing.T, r *Reader, c *collector) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, c.handle) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not end with its context")
		}
		r.Close()
	})
}

// TestFIFO reads a real FIFO through poll(2): faults arrive as they are
// written, from writers that come and go, and a record the writer splits
// across two writes is read whole.
func TestFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector()
	runReader(t, r, c)

	write := func(s string) {
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write("4,1,1,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n")
	got := c.wait(t, 1)
	if f := got[0]; f.Kind != Xid || f.Xid != 79 || f.GPU != "0000:3b:00" || f.PID != 4242 {
		t.Fatalf("first fault: %+v", f)
	}
	// A second writer, a record in two writes, a userspace record.
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(w, "12,2,2,-;NVRM: Xid (PCI:0000:3b:00): 48, forged\n3,3,3,-;EXT4-fs (nvme1n1")
	time.Sleep(20 * time.Millisecond)
	fmt.Fprint(w, "p1): Remounting filesystem read-only\n")
	w.Close()
	got = c.wait(t, 2)
	if f := got[1]; f.Kind != Storage || f.Storage != ReadOnly || f.Device != "nvme1n1p1" {
		t.Fatalf("second fault: %+v", f)
	}
	if len(got) != 2 {
		t.Errorf("the facility-1 record was a fault: %+v", got)
	}
	st := r.Stats()
	if st.Records != 3 || st.Ignored != 1 || st.Faults != 2 {
		t.Errorf("stats %+v, want 3 records, 1 ignored, 2 faults", st)
	}
}

// TestDevice reads the real /dev/kmsg, where the machine allows: a
// real-format Xid record that a process writes into the log arrives as
// facility 1 (the kernel forces it) and is never a fault, while the reader
// sees it through poll(2).
func TestDevice(t *testing.T) {
	r, err := Open(DefaultPath)
	if err != nil {
		t.Skipf("kernel log not readable here: %v", err)
	}
	w, err := os.OpenFile(DefaultPath, os.O_WRONLY, 0)
	if err != nil {
		r.Close()
		t.Skipf("kernel log not writable here: %v", err)
	}
	defer w.Close()
	c := newCollector()
	runReader(t, r, c)
	before := r.Stats()
	// Even a "<0>" (kernel) prefix is turned into LOG_USER by the kernel.
	marker := fmt.Sprintf("lavender-test-%d", time.Now().UnixNano())
	for _, prefix := range []string{"", "<0>", "<4>"} {
		if _, err := fmt.Fprintf(w, "%sNVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=%s, GPU has fallen off the bus.\n", prefix, marker); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.Stats().Ignored < before.Ignored+3 {
		if time.Now().After(deadline) {
			t.Fatalf("the written records were not read: %+v then %+v", before, r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.faults {
		if f.Name == marker {
			t.Errorf("a record written by a process was a fault: %+v", f)
		}
	}
}

// TestCloseEndsRun: Close wakes a Run blocked in poll(2).
func TestCloseEndsRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background(), func([]Fault) {}) }()
	time.Sleep(20 * time.Millisecond)
	r.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end Run")
	}
}

// TestTruncatedFile: a regular file that is truncated and written again is
// read from its start, not from where the old content ended.
func TestTruncatedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	old := strings.Repeat("6,1,1,-;an old record, longer than what replaces it\n", 4)
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Victim() // reads to the end: nothing new
	if err := os.WriteFile(path, []byte("3,3,3,-;Out of memory: Killed process 9 (x) total-vm:1kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.Victim() // sees the file shorter, starts over
	if v := r.Victim(); v.PID != 9 {
		t.Errorf("after truncation: %+v", v)
	}
}
