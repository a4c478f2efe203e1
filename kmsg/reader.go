package kmsg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultPath is the kernel log device.
const DefaultPath = "/dev/kmsg"

// OOMVictim is a process the OOM killer killed, as the kernel log names it.
type OOMVictim struct {
	PID  int
	Name string
	Seq  uint64 // the kernel log record's sequence number; 0 if unknown
}

const (
	// BatchRecords bounds the records one drain reads before it hands
	// what it found to the handler: a flood is read in batches, and a
	// poll never spins on a log that keeps filling.
	BatchRecords = 1024
	// maxQueued bounds the faults read but not yet handled: past it the
	// reader stops reading until the handler has caught up, so a flood
	// costs bounded memory and no fault is dropped by lavender (the
	// kernel's ring may still overwrite records, which Stats counts).
	maxQueued = 4 * BatchRecords
	// recordBytes is one read(2) of /dev/kmsg: the device hands out one
	// record per read and fails with EINVAL if the buffer is too small
	// for it (CONSOLE_EXT_LOG_MAX, 8 KiB, with its dictionary lines).
	recordBytes = 8192
	// maxRecordBytes is as far as the buffer grows on EINVAL.
	maxRecordBytes = 1 << 20
	// streamBytes is one read of a FIFO or a regular file.
	streamBytes = 64 << 10
	// fileTick is how often a regular file is read again at its end (a
	// regular file is always "readable" to poll(2)), and how often a
	// path that cannot be read now is tried again.
	fileTick = 50 * time.Millisecond
	// fifoTick is how often the path of a FIFO is looked at while poll(2)
	// waits for records: a FIFO removed and made anew at the path is a
	// new inode, which the old descriptor never hears of.
	fifoTick = 500 * time.Millisecond
	// rotateWait is how long the file before a rotation is still read
	// after the last bytes it gave: a writer that has not yet reopened
	// its log (logrotate's create mode, before the writer's SIGHUP) still
	// appends to the renamed file.
	rotateWait = 5 * time.Second
	// maxSkipped bounds the records Open reads to find the device's end:
	// more than the largest log the kernel keeps (32 MiB) holds.
	maxSkipped = 1 << 22
)

// kmsgMajor and kmsgMinor are /dev/kmsg's device number (mem driver, minor
// 11), whatever the device node is called or wherever it is mounted.
const kmsgMajor, kmsgMinor = 1, 11

// ErrNotKernelLog is what Open's error wraps for a path that can never be
// the kernel log: a character device other than /dev/kmsg (/dev/zero
// would hand out zeros for ever), a block device, a directory, a socket.
var ErrNotKernelLog = errors.New("not a kernel log")

type source int

const (
	device source = iota // /dev/kmsg: one record per read, poll(2), EPIPE on overwrite
	fifo                 // a FIFO of records: a byte stream, poll(2)
	file                 // a regular file of records: a byte stream, read on a tick
)

// Stats counts what a Reader read.
type Stats struct {
	Records uint64 // kernel log records read, of any facility
	Ignored uint64 // records not of the kernel facility: written by userspace, never faults
	Faults  uint64 // faults found
	// Lost counts the times the kernel overwrote records before they
	// were read (EPIPE): a flood faster than lavender reads it.
	Lost uint64
}

// input is one open file of the log: the one at the path, or the one that
// was there before a rotation, read until it is finished.
type input struct {
	fd       int // raw and non-blocking: an os.File would park on EAGAIN instead of returning it
	src      source
	dev, ino uint64
	partial  []byte // a stream may end mid-line
	// writerSeen: a writer had the FIFO open since this descriptor was
	// (data came, or poll(2) said hang-up), so end of file now means
	// that it left; until then end of file only means none came yet.
	writerSeen bool
	lastData   time.Time // when a retired file last gave bytes
}

// Reader reads the kernel log from its end on: records from before Open are
// not new faults. On the device it knows its Position, and a reader opened
// after a position (OpenFrom) reads on from the next record. Run delivers faults in batches as they arrive (poll(2)
// on the device or FIFO); Victim names the newest OOM victim, reading what
// has arrived first. It is safe for concurrent use.
//
// A FIFO or regular file is followed at its path, as log shippers follow
// a log: a file renamed away and made anew (or removed and made anew) is
// read to its end, then the new one from its start; a file truncated in
// place (copytruncate) is read again from its start; a FIFO whose writer
// closed it, or that was made anew, is opened again. While the path
// cannot be read, Health says why.
type Reader struct {
	path       string
	src        source // what the path was at Open: the device is never followed
	rotateWait time.Duration

	mu       sync.Mutex
	cur      *input // the file at the path; nil while it cannot be read
	old      *input // the file before a rotation, while it may still grow
	wake     [2]int
	closed   bool
	buf      []byte
	parser   Parser
	newest   OOMVictim
	queue    []Fault
	stats    Stats
	runErr   error
	health   error // why the path cannot be read now; nil while it can
	told     error // the health last handed to onHealth
	onHealth func(error)
	// reopened counts the files opened at the path after Open: the
	// tests hold it to one per writer gone or file rotated.
	reopened uint64

	// The device's position, by sequence number: seq is the last record
	// read, handed the last one whose faults Run has handed on (every
	// record up to it is done). A FIFO or file has none.
	seq, handed         uint64
	seqKnown, handedSet bool
	// skipping: records up to after are read and dropped, as read before
	// (OpenFrom) or as old (Open), until the first record past after or
	// the log's end.
	skipping    bool
	after       uint64
	skipped     uint64
	lastSkipped uint64
	// resumed is the report of a resume for onResume, once; nil until
	// the skipping ends, or without a resume.
	resumed  *Resumed
	resuming bool // the skipping is a resume, to be reported
	onResume func(Resumed)
	// onPosition learns each move of the position, from Run.
	onPosition func(seq uint64)
}

// From says where OpenFrom starts reading the kernel log device.
type From struct {
	// Resume: the records up to and including Seq were read by a
	// previous reader on this boot (Position); they are skipped, and
	// every record after it is read as new. Without Resume the reader
	// starts at the log's end, as Open does.
	Resume bool
	Seq    uint64
	// Track, without Resume: start at the log's end knowing the position
	// from the first, by reading the records the device holds at open
	// and skipping them, so that a position can be saved before any new
	// record comes. Without it the reader seeks to the end, and knows
	// its position from the first record that comes.
	Track bool
}

// Resumed is what a resume found, once the reader has read the device up
// to the position it was given.
type Resumed struct {
	After   uint64 // the position given: the last record read before
	Skipped uint64 // records up to it still in the log, skipped
	// Lost counts the records after it that the kernel overwrote before
	// they could be read: the oldest record the log still held was past
	// the next one.
	Lost uint64
	// Ahead: the log ended before the position (it is not of this log);
	// every record from here on is read.
	Ahead bool
}

// Open opens path (DefaultPath if empty) and starts at its end: records
// from before are not new faults. Without root or CAP_SYSLOG opening
// /dev/kmsg fails; the error says so. A path that can never be the kernel
// log is refused before it is opened (opening some devices does things);
// the error wraps ErrNotKernelLog.
func Open(path string) (*Reader, error) { return OpenFrom(path, From{}) }

// OpenFrom opens path as Open does, and on the kernel log device starts
// where from says: after the record a previous reader on this boot got to
// (from.Resume), or at the end. For a resume, or with from.Track, the
// device is read from the oldest record it holds, the records before the
// start skipped, so that the reader knows its Position from the first. A
// FIFO or regular file has no position: it is opened as Open opens it,
// whatever from says.
func OpenFrom(path string, from From) (*Reader, error) {
	if path == "" {
		path = DefaultPath
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, fmt.Errorf("kernel log: %w", &os.PathError{Op: "stat", Path: path, Err: err})
	}
	in, err := openInput(path, &st)
	if err != nil {
		return nil, err
	}
	switch {
	case in.src == file, in.src == device && !from.Resume && !from.Track:
		if _, err := unix.Seek(in.fd, 0, io.SeekEnd); err != nil {
			unix.Close(in.fd)
			return nil, fmt.Errorf("kernel log: seek to the end of %s: %w", path, err)
		}
	case in.src == device:
		// The oldest record the kernel still holds.
		if _, err := unix.Seek(in.fd, 0, io.SeekStart); err != nil {
			unix.Close(in.fd)
			return nil, fmt.Errorf("kernel log: seek to the start of %s: %w", path, err)
		}
	}
	r, err := newReader(path, in, from)
	if err != nil {
		unix.Close(in.fd)
		return nil, err
	}
	return r, nil
}

// newReader reads in, a device open where from says (at its oldest record
// for a resume or to track), a FIFO, or a file where it is to be read
// from. A tracked device is read to its end first.
func newReader(path string, in *input, from From) (*Reader, error) {
	r := &Reader{path: path, src: in.src, cur: in, rotateWait: rotateWait}
	r.buf = make([]byte, recordBytes)
	if in.src != device {
		r.buf = make([]byte, streamBytes)
	} else if from.Resume || from.Track {
		r.skipping = true
		r.after = math.MaxUint64
		if from.Resume {
			r.after, r.resuming = from.Seq, true
			r.seq, r.seqKnown = from.Seq, true
			r.handed, r.handedSet = from.Seq, true
		}
		// Start at the end: read what the log holds now, skipping it.
		for r.skipping && !r.resuming {
			if r.skipped >= maxSkipped {
				// A log that fills as fast as it is read: start here.
				r.endSkip(0, true)
				break
			}
			if _, err := r.drain(); err != nil {
				return nil, err
			}
		}
	}
	if err := unix.Pipe2(r.wake[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("kernel log: wake pipe: %w", err)
	}
	return r, nil
}

// Position is the sequence number of the last record of the kernel log
// device that the reader is done with: every fault up to it has been
// handed to Run's handler. A reader opened after it (OpenFrom) on this boot
// reads on from the next record. ok is false for a FIFO or regular file,
// and while the device has held no record yet.
func (r *Reader) Position() (seq uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handed, r.handedSet
}

// OnResume has Run call f, from its goroutine and once, with what a resume
// (OpenFrom with from.Resume) found: how many records were skipped and how
// many were lost. Set it before Run.
func (r *Reader) OnResume(f func(Resumed)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onResume = f
}

// OnPosition has Run call f, from its goroutine, each time the Position
// moves (records were read and their faults handed on), so that a caller
// can keep it without waking to look. Set it before Run.
func (r *Reader) OnPosition(f func(seq uint64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onPosition = f
}

// Check refuses a path that can never be the kernel log, as Open would:
// the error wraps ErrNotKernelLog. A path that is missing or cannot be
// looked at passes; whether it can be read is Open's to say.
func Check(path string) error {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return nil
	}
	_, err := kindOf(path, &st)
	return err
}

// kindOf says how the file st describes is read, or why it is refused.
func kindOf(path string, st *unix.Stat_t) (source, error) {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return file, nil
	case unix.S_IFIFO:
		return fifo, nil
	case unix.S_IFCHR:
		major, minor := unix.Major(st.Rdev), unix.Minor(st.Rdev)
		if major == kmsgMajor && minor == kmsgMinor {
			return device, nil
		}
		what := fmt.Sprintf("character device %d:%d", major, minor)
		if name, ok := memDevices[[2]uint32{major, minor}]; ok {
			what += " (" + name + ")"
		}
		return 0, refused(path, fmt.Sprintf("%s, not the kernel log (character device %d:%d, /dev/kmsg)", what, kmsgMajor, kmsgMinor))
	case unix.S_IFBLK:
		return 0, refused(path, "a block device")
	case unix.S_IFDIR:
		return 0, refused(path, "a directory")
	default:
		return 0, refused(path, "a socket or other special file")
	}
}

// refusedError says why a path is no kernel log; it is ErrNotKernelLog.
type refusedError struct{ path, what string }

func refused(path, what string) error { return &refusedError{path, what} }

func (e *refusedError) Error() string {
	return "kernel log: refusing " + e.path + ": it is " + e.what
}

func (e *refusedError) Is(target error) bool { return target == ErrNotKernelLog }

// memDevices names the character devices one may give by mistake.
var memDevices = map[[2]uint32]string{
	{1, 3}: "/dev/null", {1, 5}: "/dev/zero", {1, 7}: "/dev/full",
	{1, 8}: "/dev/random", {1, 9}: "/dev/urandom", {5, 0}: "/dev/tty",
	{5, 1}: "/dev/console",
}

// openInput opens the file st describes at path, without blocking (a
// FIFO's open would otherwise wait for a writer) and only for reading: a
// FIFO opened read-only sees end of file when its last writer leaves,
// which is how a writer gone is told. The descriptor must be the file
// that was judged: a path swapped in between is an error.
func openInput(path string, st *unix.Stat_t) (*input, error) {
	src, err := kindOf(path, st)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		err = &os.PathError{Op: "open", Path: path, Err: err}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("kernel log not readable (needs root or CAP_SYSLOG): %w", err)
		}
		return nil, fmt.Errorf("kernel log: %w", err)
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("kernel log: %w", &os.PathError{Op: "fstat", Path: path, Err: err})
	}
	if got.Dev != st.Dev || got.Ino != st.Ino {
		unix.Close(fd)
		return nil, fmt.Errorf("kernel log: %s was replaced while it was opened", path)
	}
	return &input{fd: fd, src: src, dev: got.Dev, ino: got.Ino}, nil
}

// Path is the file the reader reads.
func (r *Reader) Path() string { return r.path }

// Stats returns the counts so far.
func (r *Reader) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Health is nil while the log's path can be read, and otherwise why not:
// removed, not readable, or replaced by something that is no kernel log.
func (r *Reader) Health() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.health
}

// OnHealth has Run call f, from its goroutine, each time the log's path
// turns unreadable (the error), changes why, or is read again (nil). Set
// it before Run.
func (r *Reader) OnHealth(f func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onHealth = f
}

// Victim reads the records that arrived since the last read and returns
// the newest OOM victim named since Open (zero if none). Faults it finds on
// the way wait for Run's handler.
func (r *Reader) Victim() OOMVictim {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		if _, err := r.drain(); err == nil && len(r.queue) > 0 {
			r.nudge()
		}
	}
	return r.newest
}

// Run delivers the faults read from the log to handle, a batch at a time,
// from one goroutine, until ctx ends or the reader is closed (nil), or the
// log fails (the error). handle should be quick: the log is not read while
// it runs.
func (r *Reader) Run(ctx context.Context, handle func([]Fault)) error {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.nudge()
	})
	defer stop()
	for {
		r.mu.Lock()
		if r.closed || ctx.Err() != nil {
			r.mu.Unlock()
			return nil
		}
		more, err := r.drain()
		batch := r.queue
		r.queue = nil
		upTo, upToKnown := r.seq, r.seqKnown
		if err != nil {
			r.runErr = err
		}
		tell, health := r.onHealth, r.health
		if !sameHealth(health, r.told) {
			r.told = health
		} else {
			tell = nil
		}
		var resumed *Resumed
		if r.resumed != nil && r.onResume != nil {
			resumed, r.resumed = r.resumed, nil
		}
		onResume := r.onResume
		r.mu.Unlock()
		if tell != nil {
			tell(health)
		}
		if resumed != nil {
			onResume(*resumed)
		}
		if len(batch) > 0 {
			handle(batch)
		}
		if upToKnown {
			// Every record read up to upTo is handled: its faults were
			// in this batch or an earlier one.
			r.mu.Lock()
			moved := !r.handedSet || r.handed != upTo
			r.handed, r.handedSet = upTo, true
			onPosition := r.onPosition
			r.mu.Unlock()
			if moved && onPosition != nil {
				onPosition(upTo)
			}
		}
		if err != nil {
			return err
		}
		if !more {
			if err := r.wait(); err != nil {
				return err
			}
		}
	}
}

func sameHealth(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// Err is the error that ended Run, if any.
func (r *Reader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runErr
}

// Close closes the log and ends Run.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.nudge()
	var err error
	if r.cur != nil {
		err = unix.Close(r.cur.fd)
		r.cur = nil
	}
	r.closeOld()
	// The wake pipe stays open until the process ends: Run may be about
	// to poll it. Two descriptors per reader, and serve opens one.
	return err
}

// nudge wakes Run's poll. Called with mu held.
func (r *Reader) nudge() {
	_, _ = unix.Write(r.wake[1], []byte{0})
}

// wait blocks until the log may have records, a nudge, or the time to
// look at the path again.
func (r *Reader) wait() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	fds := []unix.PollFd{{Fd: int32(r.wake[0]), Events: unix.POLLIN}}
	polled := r.cur
	timeout := -1
	switch {
	case r.src == device:
		// Never followed: the device is not rotated.
	case polled == nil || polled.src == file || r.old != nil:
		timeout = int(fileTick / time.Millisecond)
	default:
		timeout = int(fifoTick / time.Millisecond)
	}
	if polled != nil && polled.src != file {
		fds = append(fds, unix.PollFd{Fd: int32(polled.fd), Events: unix.POLLIN})
	}
	r.mu.Unlock()
	for {
		_, err := unix.Poll(fds, timeout)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("kernel log: poll %s: %w", r.path, err)
		}
		break
	}
	if len(fds) > 1 && fds[1].Revents&unix.POLLHUP != 0 {
		// The FIFO's writer came and left, maybe without writing: the
		// end of file the next read gets means it is gone.
		r.mu.Lock()
		if r.cur == polled {
			polled.writerSeen = true
		}
		r.mu.Unlock()
	}
	if fds[0].Revents != 0 {
		var sink [64]byte
		for {
			if n, _ := unix.Read(r.wake[0], sink[:]); n <= 0 {
				break
			}
		}
	}
	return nil
}

// drain reads at most BatchRecords records into the queue: first what the
// file before a rotation still holds, then (after a look at the path) the
// current file. more is true when it stopped at the bound rather than at
// the log's end. Called with mu held.
func (r *Reader) drain() (more bool, err error) {
	budget := uint64(BatchRecords)
	if r.old != nil {
		atEnd, eof, err := r.read(r.old, &budget)
		if err != nil {
			// What it still held is lost; the file at the path is not.
			r.closeOld()
		} else if !atEnd {
			return true, nil
		}
		if r.old != nil && (r.old.src == fifo && eof || r.old.src == file && time.Since(r.old.lastData) >= r.rotateWait) {
			r.closeOld()
		}
	}
	if r.src != device {
		r.follow()
	}
	for reopened := false; r.cur != nil; {
		atEnd, eof, err := r.read(r.cur, &budget)
		if err != nil && r.src != device {
			// A followed file that fails (a stale NFS handle, a disk
			// error) is opened again at the next look; meanwhile the
			// reader says why it reads nothing.
			unix.Close(r.cur.fd)
			r.cur, r.health = nil, err
			return false, nil
		}
		if err != nil || !atEnd {
			return !atEnd, err
		}
		if !eof || r.cur.src != fifo || !r.cur.writerSeen || reopened {
			return false, nil
		}
		// The FIFO's last writer left. Open it again before closing
		// this descriptor, so that it always has a reader (a writer
		// that finds none gets SIGPIPE), and read the new one, which
		// is also how a FIFO made anew at the path is found.
		gone := r.cur
		r.cur = nil
		r.follow()
		unix.Close(gone.fd)
		reopened = true
	}
	return false, nil
}

// read reads in until it has nothing more now (atEnd; eof when the read
// said end of file rather than EAGAIN) or the budget of records is spent.
// Called with mu held.
func (r *Reader) read(in *input, budget *uint64) (atEnd, eof bool, err error) {
	for *budget > 0 {
		if len(r.queue) >= maxQueued {
			return false, false, nil
		}
		got, err := unix.Read(in.fd, r.buf)
		switch {
		case got > 0:
			in.writerSeen = true
			if in == r.old {
				in.lastData = time.Now()
			}
			var n uint64
			if in.src == device {
				r.record(r.buf[:got])
				n = 1
			} else {
				n = r.stream(in, r.buf[:got])
			}
			*budget -= min(n, *budget)
			continue
		case err == nil: // end of a regular file, or a FIFO without a writer
			return true, true, nil
		case errors.Is(err, unix.EAGAIN):
			if r.skipping {
				// The log's end: what comes next is new.
				r.endSkip(0, true)
			}
			return true, false, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EPIPE):
			// Records were overwritten before they were read; the
			// next read resumes at the oldest one left.
			r.stats.Lost++
			continue
		case errors.Is(err, unix.EINVAL) && in.src == device && len(r.buf) < maxRecordBytes:
			// A record longer than the buffer: read it again with a
			// bigger one.
			r.buf = make([]byte, 2*len(r.buf))
			continue
		default:
			return false, false, fmt.Errorf("kernel log: read %s: %w", r.path, err)
		}
	}
	return false, false, nil
}

// follow looks at the path and keeps the reader on the file there. The
// same file: a regular file that became shorter than what was read of it
// was truncated in place (copytruncate), and what it holds now is new, so
// it is read from its start. Another file (rotated, or made anew): the
// one read so far is retired, read on until it is finished, and the new
// one is read from its start. No file, or one that cannot be read: the
// reader says why in its health and tries again on the next look.
// Called with mu held.
func (r *Reader) follow() {
	var st unix.Stat_t
	if err := unix.Stat(r.path, &st); err != nil {
		r.retire()
		r.health = fmt.Errorf("kernel log: %w", &os.PathError{Op: "stat", Path: r.path, Err: err})
		return
	}
	if r.cur != nil && r.cur.dev == st.Dev && r.cur.ino == st.Ino {
		if r.cur.src == file {
			r.rewindIfTruncated(st.Size)
		}
		return
	}
	in, err := openInput(r.path, &st)
	if err != nil {
		r.retire()
		r.health = err
		return
	}
	r.retire()
	r.cur, r.health = in, nil
	r.reopened++
}

// retire makes the current file the one before a rotation: a writer may
// still append to it. A file retired before is closed: it was read to its
// end just before. Called with mu held.
func (r *Reader) retire() {
	if r.cur == nil {
		return
	}
	r.closeOld()
	r.old, r.cur = r.cur, nil
	r.old.lastData = time.Now()
}

// closeOld closes the file before a rotation. Called with mu held.
func (r *Reader) closeOld() {
	if r.old != nil {
		unix.Close(r.old.fd)
		r.old = nil
	}
}

// rewindIfTruncated starts the current regular file over when it became
// shorter than what was read of it. Called with mu held.
func (r *Reader) rewindIfTruncated(size int64) {
	if off, err := unix.Seek(r.cur.fd, 0, io.SeekCurrent); err == nil && size < off {
		_, _ = unix.Seek(r.cur.fd, 0, io.SeekStart)
		r.cur.partial = nil
	}
}

// record handles one read of the device: a header line, then dictionary
// lines that begin with a space.
func (r *Reader) record(b []byte) {
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	r.line(line)
}

// stream handles a chunk of a FIFO or file, line by line, and says how
// many records it held.
func (r *Reader) stream(in *input, data []byte) (records uint64) {
	if len(in.partial) > 0 {
		data = append(in.partial, data...)
		in.partial = nil
	}
	for len(data) > 0 {
		line, rest, found := bytes.Cut(data, []byte{'\n'})
		if !found {
			if len(line) < maxRecordBytes {
				in.partial = append([]byte(nil), line...)
			}
			return records
		}
		data = rest
		if len(line) > 0 && line[0] != ' ' {
			records++
			r.line(line)
		}
	}
	return records
}

// line parses one record's header line.
func (r *Reader) line(line []byte) {
	rec, ok := ParseRecord(line)
	if !ok {
		return
	}
	if r.src == device {
		if r.skipping {
			if rec.Seq <= r.after {
				r.lastSkipped = rec.Seq
				r.skipped++
				if !r.resuming {
					r.seq, r.seqKnown = rec.Seq, true
				}
				return
			}
			r.endSkip(rec.Seq, false)
		}
		r.seq, r.seqKnown = rec.Seq, true
	}
	r.stats.Records++
	if !rec.Kernel() {
		r.stats.Ignored++
		return
	}
	f, ok := r.parser.Parse(rec)
	if !ok {
		return
	}
	r.stats.Faults++
	if f.Kind == OOMKill {
		// A kill writes two records naming the same process: the
		// second keeps the first's sequence number, so the watchdog
		// sees one victim, not a new one.
		if f.PID != r.newest.PID || f.Name != r.newest.Name {
			r.newest = OOMVictim{PID: f.PID, Name: f.Name, Seq: f.Seq}
		}
	}
	r.queue = append(r.queue, f)
}

// endSkip ends the skipping of records read before: at the first record
// past the position (first), or at the log's end (atEnd). A resume is
// reported: the records the kernel overwrote meanwhile, or a position the
// log never reached. Called with mu held.
func (r *Reader) endSkip(first uint64, atEnd bool) {
	r.skipping = false
	if !r.resuming {
		if !r.seqKnown {
			// An empty log: the first record to come is new.
			return
		}
		r.handed, r.handedSet = r.seq, true
		return
	}
	rep := Resumed{After: r.after, Skipped: r.skipped}
	switch {
	case atEnd:
		// Nothing past the position yet; a log whose last record is
		// before it is not the one the position was taken on, and the
		// position is its last record.
		if rep.Ahead = r.skipped == 0 || r.lastSkipped < r.after; rep.Ahead && r.skipped > 0 {
			r.seq = r.lastSkipped
		}
	case first > r.after+1:
		rep.Lost = first - r.after - 1
	}
	r.resumed = &rep
}
