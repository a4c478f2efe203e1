package webhook

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/runlog"
)

// BenchmarkServeWebhook measures one webhook request end to end through the
// handler: decode, plan, a real push over loopback HTTP to each Bark
// target, the dedup bookkeeping and the run-log BARK line. Every request
// carries a new fingerprint, so none is deduplicated away.
func BenchmarkServeWebhook(b *testing.B) {
	for _, targets := range []int{1, 3} {
		b.Run("targets="+strconv.Itoa(targets), func(b *testing.B) {
			files := map[string]string{}
			for i := range targets {
				files[fmt.Sprintf("t%d.bark.env", i)] = barktest.New(b, "KEY").Template("KEY") + "\n"
			}
			br, _ := openHandler(b, fixtureConfig{Config: delivery.Config{ConfigDir: barktest.ConfigDir(b, files), Runlog: runlog.Options{Dir: b.TempDir()}}},
				slog.New(slog.DiscardHandler))
			mux := http.NewServeMux()
			br.Register(mux)
			body := readTestdata(b, "firing_swap_54.json")
			const fp = `"fingerprint": "5f0d3a1b2c4e6f70"`
			if !bytes.Contains(body, []byte(fp)) {
				b.Fatal("fixture lacks its fingerprint")
			}
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				n++
				unique := bytes.Replace(body, []byte(fp), fmt.Appendf(nil, `"fingerprint": "%016x"`, n), 1)
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(unique)))
				if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte("pushed=1")) {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// BenchmarkLargeWebhook is one body of 12,000 alerts (about 940 KB, under
// the 1 MiB limit) against five Bark targets that are down: the worst body
// the webhook accepts. "failing": storm control off, every push fails;
// "held": storm control at its default and a state file, as the bridge
// runs, so all but ten alerts are held and saved before the answer.
// `lavbench bigwebhook` measures the same against the built binary, with
// its RSS.
func BenchmarkLargeWebhook(b *testing.B) {
	for _, held := range []bool{false, true} {
		name := "failing"
		if held {
			name = "held"
		}
		b.Run(name, func(b *testing.B) {
			var lines []string
			for i := range 5 {
				lines = append(lines, fmt.Sprintf("%s/KEY%d/$0", barktest.DownURL(b), i))
			}
			dir := barktest.ConfigDir(b, map[string]string{"phone.bark.env": strings.Join(lines, "\n")})
			logs := b.TempDir()
			cfg := delivery.Config{ConfigDir: dir, Runlog: runlog.Options{Dir: logs}}
			if held {
				cfg.MaxPerMinute, cfg.StateFile = delivery.DefaultMaxPerMinute, filepath.Join(logs, delivery.StateFileName)
			}
			br, _ := openHandler(b, fixtureConfig{Config: cfg}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			mux := http.NewServeMux()
			br.Register(mux)
			round := 0
			b.ReportAllocs()
			for b.Loop() {
				round++
				var body bytes.Buffer
				body.WriteString(`{"version":"4","status":"firing","alerts":[`)
				for i := range 12000 {
					if i > 0 {
						body.WriteByte(',')
					}
					fmt.Fprintf(&body, `{"status":"firing","labels":{"alertname":"B"},"fingerprint":"%08x%08x"}`, round, i)
				}
				body.WriteString(`]}`)
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhook", &body))
				want := []byte("failed=12000")
				if held {
					want = []byte("held=1") // 11990 in the first body, 12000 after
				}
				if !bytes.Contains(rec.Body.Bytes(), want) {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
