package kmsg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	// fileTick is how often a regular file (tests) is read again at
	// its end: a regular file is always "readable" to poll(2).
	fileTick = 50 * time.Millisecond
)

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

// Reader reads the kernel log from its end on: records from before Open are
// not new faults. Run delivers faults in batches as they arrive (poll(2)
// on the device or FIFO); Victim names the newest OOM victim, reading what
// has arrived first. It is safe for concurrent use.
type Reader struct {
	path string
	src  source

	mu      sync.Mutex
	fd      int // raw and non-blocking: an os.File would park on EAGAIN instead of returning it
	wake    [2]int
	closed  bool
	buf     []byte
	partial []byte // a stream may end mid-line
	parser  Parser
	newest  OOMVictim
	queue   []Fault
	stats   Stats
	runErr  error
}

// Open opens path (DefaultPath if empty) and seeks to its end. Without root
// or CAP_SYSLOG opening /dev/kmsg fails; the error says so.
func Open(path string) (*Reader, error) {
	if path == "" {
		path = DefaultPath
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, fmt.Errorf("kernel log: %w", &os.PathError{Op: "stat", Path: path, Err: err})
	}
	src, flags := file, unix.O_RDONLY
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		src = device
	case unix.S_IFIFO:
		// Read and write: the FIFO then always has a writer, so poll(2)
		// never reports a hang-up between two writers.
		src, flags = fifo, unix.O_RDWR
	}
	fd, err := unix.Open(path, flags|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		err = &os.PathError{Op: "open", Path: path, Err: err}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("kernel log not readable (needs root or CAP_SYSLOG): %w", err)
		}
		return nil, fmt.Errorf("kernel log: %w", err)
	}
	if src != fifo {
		if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("kernel log: seek to the end of %s: %w", path, err)
		}
	}
	r := &Reader{path: path, src: src, fd: fd}
	if err := unix.Pipe2(r.wake[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("kernel log: wake pipe: %w", err)
	}
	r.buf = make([]byte, recordBytes)
	if src != device {
		r.buf = make([]byte, streamBytes)
	}
	return r, nil
}

// Path is the file the reader reads.
func (r *Reader) Path() string { return r.path }

// Stats returns the counts so far.
func (r *Reader) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
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
		if err != nil {
			r.runErr = err
		}
		r.mu.Unlock()
		if len(batch) > 0 {
			handle(batch)
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
	err := unix.Close(r.fd)
	// The wake pipe stays open until the process ends: Run may be about
	// to poll it. Two descriptors per reader, and serve opens one.
	return err
}

// nudge wakes Run's poll. Called with mu held.
func (r *Reader) nudge() {
	_, _ = unix.Write(r.wake[1], []byte{0})
}

// wait blocks until the log may have records, or a nudge.
func (r *Reader) wait() error {
	fds := []unix.PollFd{{Fd: int32(r.wake[0]), Events: unix.POLLIN}}
	timeout := -1
	if r.src == file {
		timeout = int(fileTick / time.Millisecond)
	} else {
		r.mu.Lock()
		closed, fd := r.closed, r.fd
		r.mu.Unlock()
		if closed {
			return nil
		}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
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

// drain reads at most BatchRecords records into the queue. more is true
// when it stopped at the bound rather than at the log's end. Called with
// mu held.
func (r *Reader) drain() (more bool, err error) {
	for n := uint64(0); n < BatchRecords; {
		if len(r.queue) >= maxQueued {
			return true, nil
		}
		got, err := unix.Read(r.fd, r.buf)
		switch {
		case got > 0:
			if r.src == device {
				r.record(r.buf[:got])
				n++
			} else {
				n += r.stream(r.buf[:got])
			}
			continue
		case err == nil: // end of a regular file
			r.rewindIfTruncated()
			return false, nil
		case errors.Is(err, unix.EAGAIN):
			return false, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EPIPE):
			// Records were overwritten before they were read; the
			// next read resumes at the oldest one left.
			r.stats.Lost++
			continue
		case errors.Is(err, unix.EINVAL) && r.src == device && len(r.buf) < maxRecordBytes:
			// A record longer than the buffer: read it again with a
			// bigger one.
			r.buf = make([]byte, 2*len(r.buf))
			continue
		default:
			return false, fmt.Errorf("kernel log: read %s: %w", r.path, err)
		}
	}
	return true, nil
}

// record handles one read of the device: a header line, then dictionary
// lines that begin with a space.
func (r *Reader) record(b []byte) {
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	r.line(line)
}

// stream handles a chunk of a FIFO or file, line by line, and says how
// many records it held.
func (r *Reader) stream(data []byte) (records uint64) {
	if len(r.partial) > 0 {
		data = append(r.partial, data...)
		r.partial = nil
	}
	for len(data) > 0 {
		line, rest, found := bytes.Cut(data, []byte{'\n'})
		if !found {
			if len(line) < maxRecordBytes {
				r.partial = append([]byte(nil), line...)
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

// rewindIfTruncated starts a regular file over when it became shorter
// than what was read of it: it was truncated or replaced, and what it
// holds now is new.
func (r *Reader) rewindIfTruncated() {
	var st unix.Stat_t
	if r.src != file || unix.Fstat(r.fd, &st) != nil {
		return
	}
	if off, err := unix.Seek(r.fd, 0, io.SeekCurrent); err == nil && st.Size < off {
		_, _ = unix.Seek(r.fd, 0, io.SeekStart)
		r.partial = nil
	}
}
