package barkbridge

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"lavender/runlog"
)

// BenchmarkServeWebhook measures one webhook request end to end through the
// handler: decode, plan, a real push over loopback HTTP to each Bark
// target, the dedup bookkeeping and the run-log BARK line. Every request
// carries a new fingerprint, so none is deduplicated away.
func BenchmarkServeWebhook(b *testing.B) {
	for _, targets := range []int{1, 3} {
		b.Run("targets="+strconv.Itoa(targets), func(b *testing.B) {
			tmp := b.TempDir()
			files := map[string]string{}
			for i := range targets {
				files[fmt.Sprintf("t%d.bark.env", i)] = newBarkServer(b, "KEY").template() + "\n"
			}
			writeTargets(b, tmp, files)
			br, err := New(Config{ConfigDir: tmp, Runlog: runlog.Options{Dir: filepath.Join(tmp, "logs")}},
				slog.New(slog.DiscardHandler), nil)
			if err != nil {
				b.Fatal(err)
			}
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
