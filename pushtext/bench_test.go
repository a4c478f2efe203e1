package pushtext

import "testing"

// BenchmarkFormatSwap measures the swap text, shared by the watchdog and
// the webhook.
func BenchmarkFormatSwap(b *testing.B) {
	s := SwapFigures{Ratio: 0.54, UsedBytes: 17501991731, TotalBytes: 34359738368}
	b.ReportAllocs()
	for b.Loop() {
		if Swap(s).Body == "" {
			b.Fatal("empty")
		}
	}
}
