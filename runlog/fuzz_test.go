package runlog

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzAppend appends arbitrary messages (split on 0xFE) under arbitrary
// caps and checks the file's invariants after every append.
func FuzzAppend(f *testing.F) {
	f.Add("device=cuda", []byte("START Building model\xfeEND   Building model 13s"), uint16(0))
	f.Add("", []byte(strings.Repeat("x\xfe", 300)), uint16(1))
	f.Add("h\nh", []byte("é\n\r\x00\xff"+strings.Repeat("語", 40)), uint16(768))
	f.Add(strings.Repeat("H", 200), []byte(strings.Repeat("m", 90)+"\xfe"), uint16(3000))
	f.Fuzz(func(t *testing.T, header string, msgs []byte, capSeed uint16) {
		maxBytes := MinMaxBytes + int(capSeed)%(4*DefaultMaxBytes)
		clock := time.Date(2026, 4, 24, 0, 41, 41, 0, time.Local)
		opts := Options{Dir: t.TempDir(), MaxBytes: maxBytes, Now: func() time.Time { return clock }}
		l, err := Start(opts, header, RunStart)
		if err != nil {
			t.Fatal(err)
		}
		wantHeader := []string{titleLine(clock)}
		if header != "" {
			wantHeader = append(wantHeader, headerLine(header))
		}
		parts := bytes.Split(msgs, []byte{0xfe})
		if len(parts) > 64 {
			parts = parts[:64]
		}
		for _, msg := range parts {
			if err := l.Append(string(msg)); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(l.Path())
			if err != nil {
				t.Fatal(err)
			}
			if len(data) > maxBytes {
				t.Fatalf("%d bytes, over the cap of %d", len(data), maxBytes)
			}
			if !utf8.Valid(data) || !bytes.HasSuffix(data, []byte("\n")) {
				t.Fatalf("not valid UTF-8 or not newline-terminated: %q", data)
			}
			file, err := Parse(data) // checks every line's length and shape
			if err != nil {
				t.Fatalf("%v: %q", err, data)
			}
			if strings.Join(file.Header, "\n") != strings.Join(wantHeader, "\n") {
				t.Fatalf("header %q, want %q", file.Header, wantHeader)
			}
			all := file.AllEntries()
			if got, want := all[len(all)-1], entryLine(clock, string(msg)); got != want {
				t.Fatalf("newest entry %q, want %q", got, want)
			}
		}
	})
}

// BenchmarkAppend measures appends at the default cap, where a compaction
// (with its two fsyncs) comes every few appends, and with a cap so large that
// none happens, which isolates the lock + single write path.
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct {
		name     string
		maxBytes int
	}{
		{"cap=1024", DefaultMaxBytes},
		{"no-compaction", 1 << 30},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := Start(Options{Dir: b.TempDir(), MaxBytes: bc.maxBytes}, "device=cuda lavender=v0.1.0", RunStart)
			if err != nil {
				b.Fatal(err)
			}
			msg := "BARK swap 54% sent ok=1 fail=0 " + strings.Repeat("x", 40)
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Append(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
