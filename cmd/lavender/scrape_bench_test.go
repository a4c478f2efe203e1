package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"lavender/exporter"
	"lavender/phaseserver"
	"lavender/runlog"
)

// BenchmarkServedScrape measures one /metrics request through the handler
// the exporter and serve commands install (metricsHandler over
// newRegistry, with the Go, process and build-info collectors and the
// swap collector on the real /proc), with and without gzip. "lavender_only"
// leaves out the Go and process collectors to show their share.
func BenchmarkServedScrape(b *testing.B) {
	for _, bc := range []struct {
		name      string
		registry  func() *prometheus.Registry
		gzip      bool
		sizeLabel string
	}{
		{"served", newRegistry, false, "bytes/scrape"},
		{"served_gzip", newRegistry, true, "gzip-bytes/scrape"},
		{"lavender_only", prometheus.NewRegistry, false, "bytes/scrape"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			reg := bc.registry()
			logger := slog.New(slog.DiscardHandler)
			exp := phaseserver.New(phaseserver.Config{ProcFS: "/proc", Runlog: runlog.Options{Dir: b.TempDir()}}, logger)
			reg.MustRegister(exporter.NewSwapCollector("/proc", 0, logger), exp)
			b.Cleanup(func() { exp.Close() })
			h := metricsHandler(reg, logger)
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
