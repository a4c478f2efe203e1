package bark

import (
	"testing"
)

// BenchmarkBarkURL measures building one push URL from a template.
func BenchmarkBarkURL(b *testing.B) {
	ts, err := parseTargets("phone.bark.env", []byte("https://api.day.app/0123456789abcdefghijkl/$0"))
	if err != nil {
		b.Fatal(err)
	}
	msg := "[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening"
	b.ReportAllocs()
	for b.Loop() {
		if u := fillMessage(ts[0].tmpl, msg); len(u) == 0 {
			b.Fatal("empty URL")
		}
	}
}
