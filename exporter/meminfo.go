package exporter

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// meminfo holds the lines of <procfs>/meminfo lavender reads, in bytes.
type meminfo struct {
	MemTotal, MemAvailable          uint64
	SwapTotal, SwapFree, SwapCached uint64
	// HaveMemAvailable is false on a kernel before 3.14, whose meminfo
	// has no MemAvailable line; MemAvailable is then estimated.
	HaveMemAvailable bool
}

// parseMeminfo reads "Key:   value kB" lines. It is the check a meminfo
// passes before gopsutil reads it (see ReadSwap), and the reading itself
// on a kernel without MemAvailable. Lines lavender does not use are
// skipped, as are lines of no such shape; a used line whose value is not a
// count, or that appears twice, is an error, and so is a file without
// MemTotal. A kernel before 3.14 has no MemAvailable: it is then MemFree +
// Buffers + Cached, which counts page cache the kernel may not be able to
// drop, so the ratio is optimistic there.
func parseMeminfo(data []byte) (meminfo, error) {
	var m meminfo
	var free, buffers, cached uint64
	var seen uint // bit i: the i-th key of the switch below
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		key, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		var dst *uint64
		var bit uint
		switch string(key) { // no allocation: the compiler special-cases this
		case "MemTotal":
			dst, bit = &m.MemTotal, 1<<0
		case "MemAvailable":
			dst, bit = &m.MemAvailable, 1<<1
		case "SwapTotal":
			dst, bit = &m.SwapTotal, 1<<2
		case "SwapFree":
			dst, bit = &m.SwapFree, 1<<3
		case "SwapCached":
			dst, bit = &m.SwapCached, 1<<4
		case "MemFree":
			dst, bit = &free, 1<<5
		case "Buffers":
			dst, bit = &buffers, 1<<6
		case "Cached":
			dst, bit = &cached, 1<<7
		default:
			continue
		}
		if seen&bit != 0 {
			return meminfo{}, fmt.Errorf("%s appears twice", key)
		}
		seen |= bit
		count, ok := meminfoCount(rest)
		if !ok {
			return meminfo{}, fmt.Errorf("%s: %q is not a count of kB", key, clipLine(rest))
		}
		kb, err := strconv.ParseUint(string(count), 10, 64)
		if err != nil {
			return meminfo{}, fmt.Errorf("%s: %w", key, err)
		}
		if kb > math.MaxUint64/1024 {
			return meminfo{}, fmt.Errorf("%s: %d kB is out of range", key, kb)
		}
		*dst = kb * 1024
	}
	if m.MemTotal == 0 {
		return meminfo{}, errors.New("no MemTotal line")
	}
	m.HaveMemAvailable = seen&(1<<1) != 0
	if !m.HaveMemAvailable {
		m.MemAvailable = free + buffers + cached
	}
	return m, nil
}

// meminfoCount returns the number of a value "   N kB" or "   N": one
// field, or two whose second is kB. It splits at ASCII white space as
// bytes.Fields would, without the slice bytes.Fields allocates for every
// line.
func meminfoCount(value []byte) (count []byte, ok bool) {
	value = bytes.TrimSpace(value)
	i := bytes.IndexAny(value, " \t\v\f\r")
	if i < 0 {
		return value, len(value) > 0
	}
	return value[:i], string(bytes.TrimSpace(value[i:])) == "kB"
}
