package webhook

import (
	"io"
	"log/slog"
	"testing"

	"github.com/lavender-ml/lavender/delivery"
)

// BenchmarkWebhookDecodeFormat measures what the webhook does per request
// before it talks to Bark: decode the payload and plan the messages.
func BenchmarkWebhookDecodeFormat(b *testing.B) {
	for _, file := range []string{"firing_swap_54.json", "two_alerts.json"} {
		b.Run(file, func(b *testing.B) {
			body := readTestdata(b, file)
			br, _ := openHandler(b, fixtureConfig{Config: delivery.Config{ConfigDir: b.TempDir()}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				msg, err := decodeWebhook(body)
				if err != nil {
					b.Fatal(err)
				}
				if p := planPushes(br, msg); p[0].delivery == nil {
					b.Fatal("nothing planned")
				}
			}
		})
	}
}
