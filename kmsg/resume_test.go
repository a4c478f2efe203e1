package kmsg

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// fakeDevice stands in for /dev/kmsg, which no test can make: a
// SOCK_SEQPACKET socket hands out one record per read, as the device does,
// and EAGAIN once it has none. The records sent before the reader opens
// are the kernel's ring as the reader finds it.
func fakeDevice(t *testing.T, ring ...string) (in *input, send func(records ...string)) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no SOCK_SEQPACKET here: %v", err)
	}
	// The writer stays open until the test ends: a closed peer is a
	// hang-up that poll(2) reports for ever, which the device never does.
	t.Cleanup(func() { unix.Close(fds[1]) })
	send = func(records ...string) {
		t.Helper()
		for _, rec := range records {
			if _, err := unix.Write(fds[1], []byte(rec)); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(ring...)
	return &input{fd: fds[0], src: device}, send
}

// xidAt is a kernel Xid 79 record of sequence number seq, whose pid is
// its seq so that the faults tell which records they came from.
func xidAt(seq int) string {
	return fmt.Sprintf("4,%d,%d,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=%d, name=python3, GPU has fallen off the bus.\n", seq, seq*1000, seq)
}

// chatter is a record that is no fault.
func chatter(seq int) string {
	return fmt.Sprintf("6,%d,%d,-;eth0: link up\n", seq, seq*1000)
}

func xids(from, to int) []string {
	var out []string
	for seq := from; seq <= to; seq++ {
		out = append(out, xidAt(seq))
	}
	return out
}

func seqs(from, to int) []int {
	var out []int
	for seq := from; seq <= to; seq++ {
		out = append(out, seq)
	}
	return out
}

func openFake(t *testing.T, in *input, from From) *Reader {
	t.Helper()
	r, err := newReader("fake-kmsg", in, from)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// resumes keeps what OnResume reports.
type resumes struct{ got chan Resumed }

func watchResume(r *Reader) *resumes {
	rs := &resumes{got: make(chan Resumed, 2)}
	r.OnResume(func(x Resumed) { rs.got <- x })
	return rs
}

func (rs *resumes) wait(t *testing.T) Resumed {
	t.Helper()
	select {
	case x := <-rs.got:
		return x
	case <-time.After(waitLong):
		t.Fatal("no resume reported")
	}
	return Resumed{}
}

func waitPosition(t *testing.T, r *Reader, want uint64) {
	t.Helper()
	testkit.WaitFor(t, waitLong, func() bool { seq, ok := r.Position(); return ok && seq == want }, fmt.Sprintf("position %d", want))
}

// TestResumeReadsWhatCameWhileStopped: a reader started afresh starts at
// the device's end but knows where it is; a reader opened after the
// position the one before reached reads every record logged since, the
// Xids of the downtime included, and none it had read.
func TestResumeReadsWhatCameWhileStopped(t *testing.T) {
	// The first run: the records from before its start are old.
	in, send := fakeDevice(t, xidAt(10), chatter(11), xidAt(12))
	r := openFake(t, in, From{Track: true})
	if seq, ok := r.Position(); !ok || seq != 12 {
		t.Fatalf("position at the start: %d %v; want 12, the log's last record", seq, ok)
	}
	c := newCollector()
	runReader(t, r, c)
	send(xidAt(13), chatter(14))
	waitPids(t, c, 13)
	waitPosition(t, r, 14)
	r.Close()

	// The next run, on the same boot: the ring still holds 10…14, and
	// 15…17 came while no reader ran (an Xid 79 among them).
	in, send = fakeDevice(t, append(append([]string{xidAt(10), chatter(11), xidAt(12), xidAt(13), chatter(14)}, xids(15, 16)...), chatter(17))...)
	r = openFake(t, in, From{Resume: true, Seq: 14})
	rs := watchResume(r)
	if seq, ok := r.Position(); !ok || seq != 14 {
		t.Fatalf("position before reading: %d %v; want 14, the one given", seq, ok)
	}
	c = newCollector()
	runReader(t, r, c)
	waitPids(t, c, 15, 16)
	if got := rs.wait(t); got != (Resumed{After: 14, Skipped: 5}) {
		t.Errorf("resume %+v; want 5 skipped, none lost", got)
	}
	waitPosition(t, r, 17)
	send(xidAt(18))
	waitPids(t, c, 15, 16, 18)
	if st := r.Stats(); st.Records != 4 || st.Faults != 3 {
		t.Errorf("stats %+v: the skipped records were counted again", st)
	}
}

// TestResumeSaysWhatTheRingLost: when the kernel overwrote records while
// no reader ran, the resume says how many, and reads the rest.
func TestResumeSaysWhatTheRingLost(t *testing.T) {
	in, _ := fakeDevice(t, xids(30, 33)...)
	r := openFake(t, in, From{Resume: true, Seq: 20})
	rs := watchResume(r)
	c := newCollector()
	runReader(t, r, c)
	waitPids(t, c, seqs(30, 33)...)
	if got := rs.wait(t); got != (Resumed{After: 20, Lost: 9}) {
		t.Errorf("resume %+v; want 9 records lost (21…29)", got)
	}
	waitPosition(t, r, 33)
}

// TestResumeNothingNew: nothing logged while no reader ran; the next
// record is read.
func TestResumeNothingNew(t *testing.T) {
	in, send := fakeDevice(t, xids(1, 3)...)
	r := openFake(t, in, From{Resume: true, Seq: 3})
	rs := watchResume(r)
	c := newCollector()
	runReader(t, r, c)
	if got := rs.wait(t); got != (Resumed{After: 3, Skipped: 3}) {
		t.Errorf("resume %+v; want 3 skipped", got)
	}
	send(xidAt(4))
	waitPids(t, c, 4)
}

// TestResumeAheadOfTheLog: a position past the log's last record is not
// of this log: it is said, and what comes next is read, not skipped.
func TestResumeAheadOfTheLog(t *testing.T) {
	in, send := fakeDevice(t, xids(1, 3)...)
	r := openFake(t, in, From{Resume: true, Seq: 100})
	rs := watchResume(r)
	c := newCollector()
	runReader(t, r, c)
	if got := rs.wait(t); got != (Resumed{After: 100, Skipped: 3, Ahead: true}) {
		t.Errorf("resume %+v; want ahead", got)
	}
	waitPosition(t, r, 3)
	send(xidAt(4))
	waitPids(t, c, 4)
}

// TestOnPositionTellsEachMove: Run tells OnPosition's function each
// position the records it read moved it to, once its faults were handed
// on, so a caller keeps it without polling.
func TestOnPositionTellsEachMove(t *testing.T) {
	in, send := fakeDevice(t, chatter(1))
	r := openFake(t, in, From{Track: true})
	moves := make(chan uint64, 8)
	r.OnPosition(func(seq uint64) { moves <- seq })
	runReader(t, r, newCollector())
	send(xidAt(2), chatter(3))
	deadline := time.After(waitLong)
	for {
		select {
		case seq := <-moves:
			if pos, ok := r.Position(); !ok || pos < seq {
				t.Errorf("told of position %d while Position says %d %v", seq, pos, ok)
			}
			if seq == 3 {
				return
			}
		case <-deadline:
			t.Fatal("no move to position 3 told")
		}
	}
}

// TestPositionWaitsForTheHandler: the position moves past a fault only
// once the handler has taken it, so that a position saved meanwhile never
// skips a fault no one handled.
func TestPositionWaitsForTheHandler(t *testing.T) {
	in, send := fakeDevice(t, chatter(1))
	r := openFake(t, in, From{Track: true})
	held, release := make(chan struct{}), make(chan struct{})
	go r.Run(t.Context(), func([]Fault) {
		held <- struct{}{}
		<-release
	})
	defer r.Close()
	send(xidAt(2))
	<-held
	if seq, ok := r.Position(); !ok || seq != 1 {
		t.Errorf("position while the handler holds record 2: %d %v; want 1", seq, ok)
	}
	close(release)
	waitPosition(t, r, 2)
}

// TestNoPositionForAFileOrFIFO: a followed file or FIFO has no sequence
// numbers of one boot; a resume is not taken, and it is opened as Open
// opens it.
func TestNoPositionForAFileOrFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kmsg")
	if err := os.WriteFile(path, []byte(xidAt(5)), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenFrom(path, From{Resume: true, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := newCollector()
	runReader(t, r, c)
	appendFile(t, path, xidAt(6))
	waitPids(t, c, 6)
	if seq, ok := r.Position(); ok {
		t.Errorf("a file has a position: %d", seq)
	}

	fifo := filepath.Join(dir, "kmsg.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	f, err := OpenFrom(fifo, From{Resume: true, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if seq, ok := f.Position(); ok {
		t.Errorf("a FIFO has a position: %d", seq)
	}
}

// TestDeviceResume reads the real /dev/kmsg where the machine allows: a
// reader opened after another's position reads every record since, once
// each, those written while no reader was open included.
func TestDeviceResume(t *testing.T) {
	r, err := OpenFrom(DefaultPath, From{Track: true})
	if err != nil {
		t.Skipf("kernel log not readable here: %v", err)
	}
	pos, ok := r.Position()
	r.Close()
	if !ok {
		t.Skip("the kernel log is empty")
	}
	w, err := os.OpenFile(DefaultPath, os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("kernel log not writable here: %v", err)
	}
	defer w.Close()
	for i := range 3 {
		if _, err := fmt.Fprintf(w, "lavender-test resume %d\n", i); err != nil {
			t.Fatal(err)
		}
	}
	r, err = OpenFrom(DefaultPath, From{Resume: true, Seq: pos})
	if err != nil {
		t.Fatal(err)
	}
	rs := watchResume(r)
	c := newCollector()
	runReader(t, r, c)
	testkit.WaitFor(t, waitLong, func() bool { return r.Stats().Records >= 3 }, "the 3 records written while no reader was open")
	if got := rs.wait(t); got.Lost != 0 || got.Ahead || got.After != pos {
		t.Errorf("resume %+v after %d", got, pos)
	}
	r.mu.Lock()
	read, last := r.stats.Records, r.seq
	r.mu.Unlock()
	if read != last-pos {
		t.Errorf("read %d records from %d to %d: each record after the position once, none before", read, pos, last)
	}
}
