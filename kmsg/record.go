// Package kmsg reads the kernel log (/dev/kmsg) and turns its records into
// the faults lavender pushes for: OOM kills, NVIDIA Xid errors, GPUs fallen
// off the bus, and storage faults (filesystem errors, read-only remounts,
// block I/O errors, NVMe timeouts, resets and dead controllers).
//
// Only records of the kernel facility count: the kernel forces everything
// userspace writes into /dev/kmsg to another facility (LOG_USER unless the
// writer names a non-zero one), so a record of facility 0 came from the
// kernel or a driver, and a forged "NVRM: Xid" line from a process is never
// a fault.
//
// The package imports nothing of lavender's.
package kmsg

import (
	"bytes"
	"strconv"
)

// Record is one kernel log record as /dev/kmsg hands it out:
// "PRIO,SEQ,USEC,FLAGS[,…];TEXT", then optional continuation lines that
// begin with a space (" KEY=value"), which Record leaves out.
type Record struct {
	Facility int    // PRIO >> 3: 0 is the kernel; userspace writes are 1 and up
	Level    int    // PRIO & 7: 0 emerg … 7 debug
	Seq      uint64 // the record's sequence number
	Usec     uint64 // microseconds since boot (CLOCK_MONOTONIC)
	// Continued is true for a record with flag 'c' (a fragment that a
	// later record continues); it is parsed like any other.
	Continued bool
	Text      string // unescaped: /dev/kmsg writes a byte < 0x20, ≥ 0x7f or '\' as \xNN
}

// Kernel reports whether the record came from the kernel (facility 0).
func (r Record) Kernel() bool { return r.Facility == 0 }

// ParseRecord reads one header line of /dev/kmsg. ok is false for a line
// that is not a record (no "prio,seq,usec,flags;" header, or numbers that
// do not parse), and for a continuation line.
func ParseRecord(line []byte) (r Record, ok bool) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	head, text, found := bytes.Cut(line, []byte{';'})
	if !found || len(head) == 0 || head[0] == ' ' {
		return Record{}, false
	}
	fields := bytes.SplitN(head, []byte{','}, 5)
	if len(fields) < 4 {
		return Record{}, false
	}
	prio, err1 := strconv.ParseUint(string(fields[0]), 10, 16)
	seq, err2 := strconv.ParseUint(string(fields[1]), 10, 64)
	usec, err3 := strconv.ParseUint(string(fields[2]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Record{}, false
	}
	return Record{
		Facility:  int(prio >> 3),
		Level:     int(prio & 7),
		Seq:       seq,
		Usec:      usec,
		Continued: bytes.Contains(fields[3], []byte{'c'}),
		Text:      unescape(text),
	}, true
}

// unescape undoes /dev/kmsg's \xNN escapes, so a message the driver printed
// with embedded newlines reads as the lines it printed.
func unescape(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && b[i+1] == 'x' {
			if v, err := strconv.ParseUint(string(b[i+2:i+4]), 16, 8); err == nil {
				out = append(out, byte(v))
				i += 3
				continue
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}
