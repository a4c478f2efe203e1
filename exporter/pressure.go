package exporter

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Pressure is one reading of <procfs>/pressure/memory, the kernel's
// pressure stall information (PSI) for memory.
//
// "some" is the share of wall time in which at least one task was stalled
// waiting for memory; "full" the share in which every non-idle task was
// stalled at once (the kernel's "thrashing").
type Pressure struct {
	// Available is false on a kernel without PSI (before 4.20, built
	// without CONFIG_PSI, or booted with psi=0); every other field is
	// then zero.
	Available bool
	// SomeAvg10 and FullAvg10 are the kernel's 10-second averages as a
	// ratio on 0–1 (the file prints percent).
	SomeAvg10, FullAvg10 float64
	// SomeTotal and FullTotal are the stall time accumulated since boot.
	SomeTotal, FullTotal time.Duration
}

// pressureFile is where PSI keeps memory pressure, relative to procfs.
const pressureFile = "pressure/memory"

// procFileReader reads one procfs file into *buf; readProcFile is the real
// one. Tests substitute it to produce errors no fake procfs can, such as
// the EOPNOTSUPP a kernel with PSI compiled in but disabled returns.
type procFileReader func(path string, buf *[]byte) ([]byte, error)

// ReadPressure reads memory pressure from <procfs>/pressure/memory (procfs
// "" means /proc). A kernel without PSI is no error: the file is missing,
// or reading it fails with EOPNOTSUPP, and the reading says Available false.
func ReadPressure(procfs string) (Pressure, error) {
	return readPressure(procfs, readProcFile)
}

func readPressure(procfs string, read procFileReader) (Pressure, error) {
	if procfs == "" {
		procfs = DefaultProcFS
	}
	return readPressureFrom(filepath.Join(procfs, pressureFile), read)
}

// readPressureFrom is readPressure of the PSI file at path.
func readPressureFrom(path string, read procFileReader) (Pressure, error) {
	buf := procBufs.Get().(*[]byte)
	defer procBufs.Put(buf)
	data, err := read(path, buf)
	switch {
	case psiUnsupported(err):
		return Pressure{}, nil
	case err != nil:
		return Pressure{}, fmt.Errorf("exporter: read %s: %w", pressureFile, err)
	}
	p, err := parsePressure(data)
	if err != nil {
		return Pressure{}, fmt.Errorf("exporter: read %s: %w", path, err)
	}
	return p, nil
}

// psiUnsupported tells a kernel without PSI from a broken procfs: the
// kernel leaves out /proc/pressure when PSI is not built in or disabled at
// boot, and answers EOPNOTSUPP when it is disabled later.
func psiUnsupported(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP)
}

// parsePressure parses the two lines of a PSI file:
//
//	some avg10=0.22 avg60=0.17 avg300=1.11 total=58761459
//	full avg10=0.23 avg60=0.16 avg300=1.08 total=58464525
//
// Both lines are required, once each: the kernel has always written both
// for memory.
func parsePressure(data []byte) (Pressure, error) {
	p := Pressure{Available: true}
	var haveSome, haveFull bool
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		kind, rest, _ := bytes.Cut(line, []byte{' '})
		var avg10 *float64
		var total *time.Duration
		var seen *bool
		switch string(kind) {
		case "some":
			avg10, total, seen = &p.SomeAvg10, &p.SomeTotal, &haveSome
		case "full":
			avg10, total, seen = &p.FullAvg10, &p.FullTotal, &haveFull
		case "":
			continue
		default:
			return Pressure{}, fmt.Errorf("unexpected line %q", clipLine(line))
		}
		if *seen {
			// The kernel writes each once; which of two would be true?
			return Pressure{}, fmt.Errorf("second %s line", kind)
		}
		*seen = true
		var haveAvg, haveTotal bool
		for _, field := range bytes.Fields(rest) {
			key, value, ok := bytes.Cut(field, []byte{'='})
			if !ok {
				return Pressure{}, fmt.Errorf("%s: field %q is not key=value", kind, clipLine(field))
			}
			switch string(key) {
			case "avg10":
				pct, err := strconv.ParseFloat(string(value), 64)
				// Written so that NaN, which every comparison fails, is refused.
				if err != nil || !(pct >= 0 && pct <= 100) {
					return Pressure{}, fmt.Errorf("%s avg10 %q is not a percentage", kind, clipLine(value))
				}
				*avg10, haveAvg = pct/100, true
			case "total":
				us, err := strconv.ParseUint(string(value), 10, 63)
				if err != nil || us > uint64(1<<63-1)/uint64(time.Microsecond) {
					return Pressure{}, fmt.Errorf("%s total %q is not a count of microseconds", kind, clipLine(value))
				}
				*total, haveTotal = time.Duration(us)*time.Microsecond, true
			}
		}
		if !haveAvg || !haveTotal {
			return Pressure{}, fmt.Errorf("%s line lacks avg10 or total", kind)
		}
	}
	if !haveSome || !haveFull {
		return Pressure{}, errors.New("no some and full lines")
	}
	return p, nil
}

// clipLine keeps an error message about a bad line short.
func clipLine(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
