package main

import (
	"io"
	"testing"
)

// BenchmarkNewParser is what every lavender command pays before it runs,
// `phase ping` from a training loop included: building the kong model of
// the whole CLI with every default and help text expanded.
func BenchmarkNewParser(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var cli CLI
		if _, err := newParser(&cli, io.Discard, io.Discard, func(int) {}); err != nil {
			b.Fatal(err)
		}
	}
}
