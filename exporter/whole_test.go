package exporter

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestWholeResponseSameBody: the scrape through WholeResponse is the same
// bytes, headers and status as promhttp's own answer, plain and gzip, with
// a Content-Length in place of chunking.
func TestWholeResponseSameBody(t *testing.T) {
	// Enough series that promhttp's answer spans several 4 KiB chunks.
	reg := fillerRegistry(t, 1000)
	inner := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	plain := httptest.NewServer(inner)
	defer plain.Close()
	whole := httptest.NewServer(WholeResponse(inner))
	defer whole.Close()
	for _, enc := range []string{"identity", "gzip"} {
		want, wantBody, _ := scrape(t, plain.URL, []string{enc})
		got, gotBody, _ := scrape(t, whole.URL, []string{enc})
		if !bytes.Equal(gotBody, wantBody) || len(gotBody) < 16<<10 {
			t.Errorf("%s: body differs (%d vs %d bytes)", enc, len(gotBody), len(wantBody))
		}
		if got.StatusCode != want.StatusCode || !equalHeaders(got.Header, want.Header, "Content-Length", "Date") {
			t.Errorf("%s: %d %v, want %d %v", enc, got.StatusCode, got.Header, want.StatusCode, want.Header)
		}
		if len(want.TransferEncoding) == 0 || len(got.TransferEncoding) != 0 || got.ContentLength <= 0 {
			t.Errorf("%s: chunked %v → %v, Content-Length %d; want chunked → one piece with a length", enc, want.TransferEncoding, got.TransferEncoding, got.ContentLength)
		}
	}
}

// TestWholeResponseGzipsWhatPromhttpWould: behind WholeResponse, a
// promhttp handler that does not compress answers every Accept-Encoding as
// promhttp's compressing handler does (the same encoding, headers and
// decompressed body), only at a fast level: more bytes, much less CPU.
func TestWholeResponseGzipsWhatPromhttpWould(t *testing.T) {
	reg := fillerRegistry(t, 300)
	compressing := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer compressing.Close()
	whole := httptest.NewServer(WholeResponse(promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true})))
	defer whole.Close()
	for _, ae := range [][]string{
		nil,
		{"gzip"},
		{"gzip, deflate, br, zstd"}, // a browser
		{"identity"},
		{"*"},
		{"gzip;q=0"},
		{"gzip;q=0.5, identity"},
		{"identity;q=0.5, gzip;q=0.8"},
		{"*;q=0.5, gzip"},
		{"deflate", "gzip"}, // two header lines
		{"deflate, br"},
		{" gzip ; q=1.0 "},
	} {
		want, wantBody, wantSent := scrape(t, compressing.URL, ae)
		got, gotBody, gotSent := scrape(t, whole.URL, ae)
		if !bytes.Equal(gotBody, wantBody) {
			t.Errorf("Accept-Encoding %q: body differs (%d vs %d bytes)", ae, len(gotBody), len(wantBody))
		}
		if got.StatusCode != want.StatusCode || !equalHeaders(got.Header, want.Header, "Content-Length", "Date", "Transfer-Encoding") {
			t.Errorf("Accept-Encoding %q: %d %v, want %d %v", ae, got.StatusCode, got.Header, want.StatusCode, want.Header)
		}
		if got.Header.Get("Content-Encoding") == "gzip" && (gotSent >= len(gotBody)/3 || gotSent > wantSent*13/10) {
			t.Errorf("Accept-Encoding %q: %d bytes gzipped to %d (promhttp's level: %d)", ae, len(gotBody), gotSent, wantSent)
		}
	}
}

// TestAcceptsGzip covers what the comparison with promhttp cannot: weights
// that do not parse, and case.
func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"gzip"}, true},
		{[]string{"GZip"}, true},
		{[]string{"gzip;q=0"}, false},
		{[]string{"gzip;q=abc"}, false},
		{[]string{"gzip;q=2"}, false},
		{[]string{"gzip;q=0.001"}, true},
		{[]string{"gzip;Q=0"}, false},
		{[]string{"x-gzip"}, false},
		{[]string{"*"}, false},
		{[]string{"*;q=0.5, gzip"}, true},
		{[]string{"gzip, identity;q=0"}, true},
		{[]string{"gzip;q=0.5, identity;q=0.5"}, false},
	} {
		if got := acceptsGzip(tc.values); got != tc.want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", tc.values, got, tc.want)
		}
	}
}

// TestWholeResponseCompressesOnly200: an error answer, and one whose
// handler set its own encoding or length, goes as the handler wrote it.
func TestWholeResponseCompressesOnly200(t *testing.T) {
	body := strings.Repeat("lavender_swap_used_bytes 0\n", 100)
	for name, h := range map[string]http.HandlerFunc{
		"error": func(w http.ResponseWriter, r *http.Request) { http.Error(w, body, http.StatusServiceUnavailable) },
		"own encoding": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, body)
		},
		"own length": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			io.WriteString(w, body)
		},
	} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		want := httptest.NewRecorder()
		h.ServeHTTP(want, req)
		got := httptest.NewRecorder()
		WholeResponse(h).ServeHTTP(got, req)
		if got.Code != want.Code || got.Body.String() != want.Body.String() || !equalHeaders(got.Header(), want.Header(), "Content-Length") {
			t.Errorf("%s: %d %v, want %d %v", name, got.Code, got.Header(), want.Code, want.Header())
		}
	}
}

// fillerRegistry is swap54Registry with series more gauges, to make an
// answer of a given size.
func fillerRegistry(t *testing.T, series int) *prometheus.Registry {
	reg := swap54Registry(t)
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "filler", Help: "Filler."}, []string{"i"})
	for i := range series {
		g.WithLabelValues(strconv.Itoa(i)).Set(float64(i))
	}
	reg.MustRegister(g)
	return reg
}

// scrape GETs url in the text format with acceptEncoding as its
// Accept-Encoding lines, and returns the answer, its body decompressed and
// how many bytes were sent.
func scrape(t *testing.T, url string, acceptEncoding []string) (*http.Response, []byte, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	req.Header["Accept-Encoding"] = acceptEncoding
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sent := len(body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	return resp, body, sent
}

func equalHeaders(a, b http.Header, except ...string) bool {
	a, b = a.Clone(), b.Clone()
	for _, k := range except {
		a.Del(k)
		b.Del(k)
	}
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "\n") != strings.Join(b[k], "\n") {
			return false
		}
	}
	return true
}

// TestWholeResponseStatuses: an error status and its body, a handler that
// writes nothing, a 204 and a HEAD come out as without the wrapper.
func TestWholeResponseStatuses(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"error":   func(w http.ResponseWriter, r *http.Request) { http.Error(w, "too many", http.StatusServiceUnavailable) },
		"nothing": func(w http.ResponseWriter, r *http.Request) {},
		"204":     func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
		"twice": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, "body")
		},
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			want := httptest.NewRecorder()
			h.ServeHTTP(want, httptest.NewRequest(method, "/metrics", nil))
			got := httptest.NewRecorder()
			WholeResponse(h).ServeHTTP(got, httptest.NewRequest(method, "/metrics", nil))
			if got.Code != want.Code || got.Body.String() != want.Body.String() || !equalHeaders(got.Header(), want.Header(), "Content-Length") {
				t.Errorf("%s %s: %d %q %v, want %d %q %v", name, method, got.Code, got.Body, got.Header(), want.Code, want.Body, want.Header())
			}
			if cl := got.Header().Get("Content-Length"); cl != "" && cl != strconv.Itoa(got.Body.Len()) {
				t.Errorf("%s %s: Content-Length %s for %d bytes", name, method, cl, got.Body.Len())
			}
		}
	}
}

// BenchmarkWholeResponse serves one scrape over loopback HTTP, promhttp's
// handler alone and behind WholeResponse: a registry of the swap
// collector on a fake procfs and filler series, about the size of the
// exporter's own answer (15 KB), so the difference is the write(2)s.
func BenchmarkWholeResponse(b *testing.B) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewSwapCollector("testdata/procfs/swap54", testPageSize, nil))
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "filler_series", Help: "Filler, to make the answer the size of a real one."}, []string{"i"})
	for i := range 450 {
		g.WithLabelValues(strconv.Itoa(i)).Set(float64(i))
	}
	reg.MustRegister(g)
	inner := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	for name, h := range map[string]http.Handler{"promhttp": inner, "whole": WholeResponse(inner)} {
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.Header.Set("Accept", "text/plain;version=0.0.4")
			req.Header.Set("Accept-Encoding", "identity")
			var size int64
			b.ReportAllocs()
			for b.Loop() {
				resp, err := srv.Client().Do(req)
				if err != nil {
					b.Fatal(err)
				}
				size, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%d %v", resp.StatusCode, err)
				}
			}
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}
