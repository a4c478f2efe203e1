package exporter

import (
	"bytes"
	"testing"
)

// meminfoCount splits a value as bytes.Fields did before it: one field,
// or a count and kB, at any run of white space.
func TestMeminfoCountSplitsAsFields(t *testing.T) {
	for _, value := range []string{
		"   1234 kB", "1234 kB", "\t1234\tkB\t", "1234", "  1234  ", "1234  kB  ",
		"", "   ", "1234 MB", "1234 kB x", "kB", "1234 kb", "12 34 kB", "1234\r\nkB",
	} {
		fields := bytes.Fields([]byte(value))
		wantOK := len(fields) == 1 || (len(fields) == 2 && string(fields[1]) == "kB")
		count, ok := meminfoCount([]byte(value))
		if ok != wantOK || (ok && string(count) != string(fields[0])) {
			t.Errorf("meminfoCount(%q) = %q, %v; bytes.Fields gives %q", value, count, ok, fields)
		}
	}
}

func BenchmarkParseMeminfo(b *testing.B) {
	data := []byte("MemTotal:       65536000 kB\nMemFree:        1234567 kB\nMemAvailable:   9830400 kB\nBuffers:          812344 kB\n" +
		"Cached:         21474836 kB\nSwapCached:     1048576 kB\nActive:         30123456 kB\nSwapTotal:      33554432 kB\nSwapFree:       15435039 kB\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseMeminfo(data); err != nil {
			b.Fatal(err)
		}
	}
}
