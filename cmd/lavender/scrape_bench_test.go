package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/exporter"
	"github.com/lavender-ml/lavender/phaseserver"
	"github.com/lavender-ml/lavender/runlog"
)

// BenchmarkServedScrape measures one /metrics request through the handler
// the exporter and serve commands install (app.MetricsHandler, with the
// Go, process and build-info metrics, over a registry of the phase server
// and the swap collector on the real /proc), with and without gzip.
func BenchmarkServedScrape(b *testing.B) {
	for _, bc := range []struct {
		name      string
		gzip      bool
		sizeLabel string
	}{
		{"served", false, "bytes/scrape"},
		{"served_gzip", true, "gzip-bytes/scrape"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			logger := slog.New(slog.DiscardHandler)
			exp := phaseserver.New(phaseserver.Config{ProcFS: "/proc", Runlog: runlog.Options{Dir: b.TempDir()}}, logger)
			reg.MustRegister(exporter.NewSwapCollector("/proc", 0, logger), exp)
			b.Cleanup(func() { exp.Close() })
			h := app.MetricsHandler(reg, logger)
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Header.Set("Accept", "text/plain;version=0.0.4")
			if bc.gzip {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			var size int
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), bc.sizeLabel)
		})
	}
}

// BenchmarkExporterCommandScrape measures one /metrics request over
// loopback HTTP to the exporter command as it runs, with every collector
// it registers (swap, phases, process visibility, kernel log, disk guard,
// Go, process, build info) on the real /proc. The client shares the
// process, so a CPU profile of it shows the server's and the client's
// work; the collectors' share is what Registry.Gather spends.
func BenchmarkExporterCommandScrape(b *testing.B) {
	for _, encoding := range []string{"identity", "gzip"} {
		b.Run(encoding, func(b *testing.B) {
			p := startInProcess(b, nil, "exporter", "--path.procfs=/proc", "--runlog.dir="+filepath.Join(b.TempDir(), "logs"))
			// With Accept-Encoding set by hand the transport leaves the body
			// as the server sent it.
			client := &http.Client{Timeout: 10 * time.Second}
			req, err := http.NewRequest(http.MethodGet, p.base+"/metrics", nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Accept", "text/plain;version=0.0.4")
			req.Header.Set("Accept-Encoding", encoding)
			var size int64
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				size, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d, %v", resp.StatusCode, err)
				}
			}
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}
