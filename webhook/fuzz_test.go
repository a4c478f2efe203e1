package webhook

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/pushtext"
)

// FuzzWebhook: decoding and planning any body never panics, and every
// message is valid UTF-8 within bark.MaxMessageBytes, as is every run-log subject.
func FuzzWebhook(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false, false)
	}
	f.Add([]byte(`{"version":"4","alerts":[{"status":"firing","labels":{"alertname":"SwapUsageHigh"},"annotations":{"swap_used_ratio":"1e-400","swap_used_bytes":"1e300","swap_total_bytes":"-0"}}]}`), true, true)
	f.Add([]byte(`{"version":"4","alerts":[{"status":"resolved","labels":{"alertname":"\xff\u2028"},"annotations":{"summary":"\u0000"}}]}`), true, false)

	dir := f.TempDir()
	bridges := map[[2]bool]*Handler{}
	for _, sr := range []bool{false, true} {
		for _, only := range []bool{false, true} {
			b, _ := openHandler(f, fixtureConfig{Config: delivery.Config{ConfigDir: dir}, SendResolved: sr, OnlySwap: only}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			bridges[[2]bool{sr, only}] = b
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, sendResolved, onlySwap bool) {
		msg, err := decodeWebhook(body)
		if err != nil {
			if msg != nil {
				t.Fatal("message returned with an error")
			}
			return
		}
		b := bridges[[2]bool{sendResolved, onlySwap}]
		plans := planPushes(b, msg)
		if len(plans) != len(msg.Alerts) {
			t.Fatalf("%d plans for %d alerts", len(plans), len(msg.Alerts))
		}
		for _, p := range plans {
			switch p.status {
			case "firing", "resolved", "unknown":
			default:
				t.Fatalf("status label %q", p.status)
			}
			d := p.delivery
			if d == nil {
				continue
			}
			if !utf8.ValidString(d.Text) || len(d.Text) > bark.MaxMessageBytes || d.Text == "" {
				t.Fatalf("message %q: valid %v, %d bytes", d.Text, utf8.ValidString(d.Text), len(d.Text))
			}
			if !strings.HasPrefix(d.Text, pushtext.DefaultPrefix+" ") {
				t.Fatalf("message %q lacks the prefix", d.Text)
			}
			s := delivery.Subject(d.Subject)
			if !utf8.ValidString(s) || len(s) > delivery.MaxSubjectBytes || strings.ContainsAny(s, "\n\r") {
				t.Fatalf("subject %q", s)
			}
			if d.Key == nil {
				t.Fatal("webhook delivery without a dedup key")
			}
		}
	})
}
