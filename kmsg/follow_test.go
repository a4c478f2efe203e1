package kmsg

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

const waitLong = 20 * time.Second

// testXid is a kernel Xid 79 record whose pid tells the records apart.
func testXid(pid int) string {
	return fmt.Sprintf("4,%d,%d,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=%d, name=python3, GPU has fallen off the bus.\n", pid, pid, pid)
}

// pids are the processes the faults so far name, in the order read.
func (c *collector) pids() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, f := range c.faults {
		out = append(out, f.PID)
	}
	return out
}

// waitPids waits until the faults read name exactly want, each once, in
// that order.
func waitPids(t *testing.T, c *collector, want ...int) {
	t.Helper()
	testkit.WaitFor(t, waitLong, func() bool { return len(c.pids()) >= len(want) }, fmt.Sprintf("faults naming %v", want))
	if got := c.pids(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("faults name %v; want %v, each once", got, want)
	}
}

func openAppend(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func write(t *testing.T, w *os.File, s string) {
	t.Helper()
	if _, err := w.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// healthLog keeps every health Run reports.
type healthLog struct {
	mu   sync.Mutex
	seen []error
}

func (h *healthLog) note(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, err)
}

func (h *healthLog) all() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.seen...)
}

// TestFollowRotatedFile rotates a regular file as logrotate and log
// relays do, with a writer that keeps appending to the renamed file until
// it reopens: every record is read once, the old file's before the new
// one's, the new file from its start.
func TestFollowRotatedFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rotate func(t *testing.T, path string)
	}{
		{"renamed and created anew", func(t *testing.T, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed and created anew", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kern.log")
			oldFile := openAppend(t, path)
			write(t, oldFile, testXid(1)) // before Open: not new
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			r.rotateWait = time.Hour // the late write below must not race it
			c := newCollector()
			runReader(t, r, c)
			write(t, oldFile, testXid(2))
			waitPids(t, c, 2)

			tc.rotate(t, path)
			// The writer has not reopened yet: it still appends to the
			// file it has, which the path no longer names.
			write(t, oldFile, testXid(3))
			waitPids(t, c, 2, 3)
			newFile := openAppend(t, path)
			write(t, newFile, testXid(4)+testXid(5))
			waitPids(t, c, 2, 3, 4, 5)
			// A record the old file still takes after the switch is read too.
			write(t, oldFile, testXid(6))
			waitPids(t, c, 2, 3, 4, 5, 6)
			write(t, newFile, testXid(7))
			waitPids(t, c, 2, 3, 4, 5, 6, 7)
			if st := r.Stats(); st.Records != 6 {
				t.Errorf("read %d records; 6 were written after Open", st.Records)
			}
		})
	}
}

// TestFollowCopyTruncate: logrotate's copytruncate copies the file and
// truncates it in place; the writer goes on at the new end. What follows
// is read from the file's start, once.
func TestFollowCopyTruncate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kern.log")
	w := openAppend(t, path)
	write(t, w, testXid(1))
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector()
	runReader(t, r, c)
	write(t, w, testXid(2)+testXid(3))
	waitPids(t, c, 2, 3)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	write(t, w, testXid(4))
	waitPids(t, c, 2, 3, 4)
	write(t, w, testXid(5))
	waitPids(t, c, 2, 3, 4, 5)
	if st := r.Stats(); st.Records != 4 {
		t.Errorf("read %d records; 4 were written after Open", st.Records)
	}
}

// TestFollowFileGoneAndBack: a file removed says so in Health, through
// OnHealth once however many looks find it missing, and is read again
// from its start when it is back.
func TestFollowFileGoneAndBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kern.log")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r.rotateWait = 0
	var h healthLog
	r.OnHealth(h.note)
	c := newCollector()
	runReader(t, r, c)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, waitLong, func() bool { return r.Health() != nil }, "the reader to say the file is gone")
	if err := r.Health(); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("Health() = %v; want the path and no such file", err)
	}
	// Several looks at the missing path.
	before := r.Stats()
	testkit.WaitFor(t, waitLong, func() bool { return len(h.all()) == 1 }, "OnHealth to hear of it")
	w := openAppend(t, path)
	write(t, w, testXid(8))
	waitPids(t, c, 8)
	testkit.WaitFor(t, waitLong, func() bool { return len(h.all()) >= 2 }, "OnHealth to hear the file is back")
	seen := h.all()
	if len(seen) != 2 || seen[0] == nil || seen[1] != nil {
		t.Errorf("OnHealth heard %v; want the error once, then nil once", seen)
	}
	if r.Health() != nil || before.Records != 0 {
		t.Errorf("after: Health() = %v, records before %d", r.Health(), before.Records)
	}
}

// TestFIFOWriterGoneAndRecreated: a FIFO read-only sees end of file when
// its writer leaves; it is opened again once (not in a loop), and a FIFO
// removed and made anew at the path, with a writer still on the old one,
// is found by its inode: both are read to the end.
func TestFIFOWriterGoneAndRecreated(t *testing.T) {
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
	reopened := func() uint64 {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.reopened
	}
	openWriter := func() *os.File {
		t.Helper()
		var w *os.File
		// Non-blocking: ENXIO until the reader has the new FIFO open.
		testkit.WaitFor(t, waitLong, func() bool {
			fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
			if err != nil {
				return false
			}
			w = os.NewFile(uintptr(fd), path)
			return true
		}, "a reader on "+path)
		t.Cleanup(func() { w.Close() })
		return w
	}

	w := openWriter()
	write(t, w, testXid(1))
	waitPids(t, c, 1)
	w.Close()
	testkit.WaitFor(t, waitLong, func() bool { return reopened() == 1 }, "the FIFO opened again after its writer left")
	// Two more looks at the path (its tick) pass without another open:
	// the fresh descriptor's end of file is no writer gone.
	w = openWriter()
	write(t, w, testXid(2))
	waitPids(t, c, 1, 2)
	if n := reopened(); n != 1 {
		t.Errorf("opened again %d times for one writer gone", n)
	}

	// Made anew while the old writer is still on the old FIFO.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	w2 := openWriter()
	write(t, w2, testXid(3))
	waitPids(t, c, 1, 2, 3)
	write(t, w, testXid(4)) // the old FIFO is still read
	waitPids(t, c, 1, 2, 3, 4)
	w.Close()
	write(t, w2, testXid(5))
	waitPids(t, c, 1, 2, 3, 4, 5)
	if st := r.Stats(); st.Records != 5 {
		t.Errorf("read %d records; 5 were written", st.Records)
	}
	if err := r.Health(); err != nil {
		t.Errorf("Health() = %v", err)
	}
}

// TestRefusesWhatIsNoKernelLog: a character device other than the kernel
// log would be read for ever (/dev/zero hands out zeros at full speed);
// it, a directory and a socket are refused before they are opened, and
// the error names the path and what it is.
func TestRefusesWhatIsNoKernelLog(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct{ path, what string }{
		{"/dev/zero", "character device 1:5 (/dev/zero)"},
		{"/dev/null", "character device 1:3 (/dev/null)"},
		{"/dev/urandom", "character device 1:9 (/dev/urandom)"},
		{dir, "a directory"},
		{sock, "a socket"},
	} {
		if _, err := os.Stat(tc.path); err != nil {
			t.Logf("skipping %s: %v", tc.path, err)
			continue
		}
		r, err := Open(tc.path)
		if err == nil {
			r.Close()
			t.Errorf("Open(%s) succeeded", tc.path)
			continue
		}
		if !errors.Is(err, ErrNotKernelLog) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.what) {
			t.Errorf("Open(%s): %v; want ErrNotKernelLog naming the path and %q", tc.path, err, tc.what)
		}
	}
}

// TestRefusesADeviceSwappedIn: a followed path replaced by a link to
// /dev/zero is refused at the next look, as at Open: nothing is read and
// Health says why, until a log is back.
func TestRefusesADeviceSwappedIn(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skipf("no /dev/zero: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "kern.log")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r.rotateWait = 0
	c := newCollector()
	runReader(t, r, c)
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link, path); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, waitLong, func() bool { return errors.Is(r.Health(), ErrNotKernelLog) }, "/dev/zero refused")
	if st := r.Stats(); st.Records != 0 {
		t.Errorf("read %d records of /dev/zero", st.Records)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	w := openAppend(t, path)
	write(t, w, testXid(9))
	waitPids(t, c, 9)
	if err := r.Health(); err != nil {
		t.Errorf("Health() = %v once a log is back", err)
	}
}
