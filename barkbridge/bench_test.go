package barkbridge

import (
	"io"
	"log/slog"
	"testing"
)

// BenchmarkWebhookDecodeFormat measures what the webhook does per request
// before it talks to Bark: decode the payload and plan the messages.
func BenchmarkWebhookDecodeFormat(b *testing.B) {
	for _, file := range []string{"firing_swap_54.json", "two_alerts.json"} {
		b.Run(file, func(b *testing.B) {
			body := readTestdata(b, file)
			br, err := New(Config{ConfigDir: b.TempDir()}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				msg, err := decodeWebhook(body)
				if err != nil {
					b.Fatal(err)
				}
				if p := br.plan(msg); p[0].delivery == nil {
					b.Fatal("nothing planned")
				}
			}
		})
	}
}

// BenchmarkBarkURL measures building one push URL from a template.
func BenchmarkBarkURL(b *testing.B) {
	ts, err := parseTargets("phone.bark.env", []byte("https://api.day.app/0123456789abcdefghijkl/$0"))
	if err != nil {
		b.Fatal(err)
	}
	msg := formatSwap(DefaultPrefix, SwapFigures{Ratio: 0.54, UsedBytes: 17501991731, TotalBytes: 34359738368})
	b.ReportAllocs()
	for b.Loop() {
		if u := fillMessage(ts[0].tmpl, msg); len(u) == 0 {
			b.Fatal("empty URL")
		}
	}
}

// BenchmarkFormatSwap measures the shared swap formatter.
func BenchmarkFormatSwap(b *testing.B) {
	s := SwapFigures{Ratio: 0.54, UsedBytes: 17501991731, TotalBytes: 34359738368}
	b.ReportAllocs()
	for b.Loop() {
		if formatSwap(DefaultPrefix, s) == "" {
			b.Fatal("empty")
		}
	}
}
