package exporter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"sync"
	"syscall"
)

// DefaultKmsgPath is the kernel log device the OOM victim reader reads.
const DefaultKmsgPath = "/dev/kmsg"

// OOMVictim is a process the OOM killer killed, as the kernel log names it.
type OOMVictim struct {
	PID  int
	Name string
	Seq  uint64 // the kernel log record's sequence number; 0 if unknown
}

// maxKmsgRecordsPerRead bounds one Read: a poll never spins on a kernel
// log that a flood keeps filling.
const maxKmsgRecordsPerRead = 1024

// kmsgRecordBytes is one read(2) of /dev/kmsg: the device hands out one
// record per read and fails with EINVAL if the buffer is too small for it
// (records are at most about 1 KiB of text plus dictionary lines).
const kmsgRecordBytes = 8192

// The two records the OOM killer writes for a kill (mm/oom_kill.c):
//
//	oom-kill:constraint=CONSTRAINT_NONE,…,task_memcg=/,task=python3,pid=4242,uid=1000
//	Out of memory: Killed process 4242 (python3) total-vm:… (or "Memory cgroup out of memory: …")
var (
	killedProcess = regexp.MustCompile(`Killed process (\d+) \((.*?)\)(?: |$)`)
	oomKillTask   = regexp.MustCompile(`oom-kill:.*[:,]task=([^,]*),pid=(\d+)`)
)

// OOMVictimReader names the newest OOM victim from the kernel log. It reads
// /dev/kmsg without blocking (EAGAIN: no more records) and starts at the
// log's end, so kills from before lavender started are never named. It is
// safe for concurrent use.
type OOMVictimReader struct {
	mu      sync.Mutex
	fd      int // a raw descriptor: os.File would park a goroutine on EAGAIN instead of returning it
	closed  bool
	buf     []byte
	partial []byte // a regular file (tests) may end mid-line
	newest  OOMVictim
}

// OpenOOMVictimReader opens path (DefaultKmsgPath if empty) and seeks to
// its end. Without root or CAP_SYSLOG the open fails; the caller then
// leaves victims unnamed.
func OpenOOMVictimReader(path string) (*OOMVictimReader, error) {
	if path == "" {
		path = DefaultKmsgPath
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("exporter: open kernel log: %w", &os.PathError{Op: "open", Path: path, Err: err})
	}
	if _, err := syscall.Seek(fd, 0, io.SeekEnd); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("exporter: seek to the end of %s: %w", path, err)
	}
	return &OOMVictimReader{fd: fd, buf: make([]byte, kmsgRecordBytes)}, nil
}

// Read reads the records that arrived since the last Read, at most
// maxKmsgRecordsPerRead of them, and returns the newest victim named since
// the reader was opened (zero if none). An error other than "no more
// records" is returned with the newest victim known so far.
func (r *OOMVictimReader) Read() (OOMVictim, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.newest, errors.New("exporter: read kernel log: closed")
	}
	for range maxKmsgRecordsPerRead {
		n, err := syscall.Read(r.fd, r.buf)
		if n > 0 {
			r.scan(r.buf[:n])
		}
		switch {
		case err == nil && n > 0:
			continue
		case err == nil, errors.Is(err, syscall.EAGAIN):
			return r.newest, nil // no more records for now
		case errors.Is(err, syscall.EINTR), errors.Is(err, syscall.EPIPE):
			continue // records were overwritten before we read them; the next read resumes
		default:
			return r.newest, fmt.Errorf("exporter: read kernel log: %w", err)
		}
	}
	return r.newest, nil
}

// Close closes the kernel log.
func (r *OOMVictimReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	return syscall.Close(r.fd)
}

// scan looks at every complete line of data; /dev/kmsg hands out whole
// records, a regular file whatever fits.
func (r *OOMVictimReader) scan(data []byte) {
	if len(r.partial) > 0 {
		data = append(r.partial, data...)
		r.partial = nil
	}
	for len(data) > 0 {
		line, rest, found := bytes.Cut(data, []byte{'\n'})
		if !found {
			if len(line) < kmsgRecordBytes {
				r.partial = append([]byte(nil), line...)
			}
			return
		}
		data = rest
		if v, ok := parseKmsgVictim(line); ok {
			// A kill writes two records naming the same process: the
			// second keeps the first's sequence number, so the watchdog
			// sees one victim, not a new one.
			if v.PID != r.newest.PID || v.Name != r.newest.Name {
				r.newest = v
			}
		}
	}
}

// parseKmsgVictim reads one /dev/kmsg record, "prio,seq,usec,flags;text",
// and reports the victim its text names. A line without the header (a
// plain log line) is read as text alone.
func parseKmsgVictim(line []byte) (OOMVictim, bool) {
	var v OOMVictim
	text := line
	if head, msg, ok := bytes.Cut(line, []byte{';'}); ok && bytes.Count(head, []byte{','}) >= 3 {
		fields := bytes.Split(head, []byte{','})
		if seq, err := strconv.ParseUint(string(fields[1]), 10, 64); err == nil {
			v.Seq = seq
		}
		text = msg
	}
	var pid, name []byte
	if m := killedProcess.FindSubmatch(text); m != nil {
		pid, name = m[1], m[2]
	} else if m := oomKillTask.FindSubmatch(text); m != nil {
		name, pid = m[1], m[2]
	} else {
		return OOMVictim{}, false
	}
	n, err := strconv.Atoi(string(pid))
	if err != nil || n <= 0 {
		return OOMVictim{}, false
	}
	v.PID, v.Name = n, string(name)
	return v, true
}
