package exporter

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
)

// WholeResponse serves h's answer in one piece, with a Content-Length,
// instead of as the chunks h writes it in.
//
// promhttp encodes a scrape through a 4 KiB buffer into the
// ResponseWriter, and net/http sends every flush of it as a chunk of its
// own: a 15 KB exposition left in five write(2)s, each of which on
// loopback also runs the receiver's side of TCP, and which together took
// a fifth of the exporter's CPU under load. Buffered whole, the answer
// leaves in two (net/http's 4 KiB connection buffer, then the rest). The
// body is the same bytes; only the framing changes, from chunked to a
// Content-Length, which every HTTP/1.1 client reads.
//
// A scrape is small (tens of KB) and promhttp already holds all of it as
// metric families before encoding, so buffering adds no new bound on
// memory. What it changes: a client gone mid-answer no longer fails
// promhttp's write (its errors_total{cause="encoding"} and error log
// line), since the write that fails is this one, after promhttp is done;
// net/http drops that error as it drops any write to a closed connection.
func WholeResponse(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := wholeBufs.Get().(*bytes.Buffer)
		bw := &bufferedWriter{w: w, buf: buf}
		defer func() {
			if buf.Cap() <= maxPooledBody {
				buf.Reset()
				wholeBufs.Put(buf)
			}
		}()
		h.ServeHTTP(bw, r)
		bw.send()
	})
}

// maxPooledBody is the largest buffer kept for the next answer: a few
// times a scrape, so that an odd large answer is not held for ever.
const maxPooledBody = 256 << 10

var wholeBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// bufferedWriter holds the status and body until the handler returns; the
// header map is the real writer's, so what the handler sets is sent.
type bufferedWriter struct {
	w      http.ResponseWriter
	buf    *bytes.Buffer
	status int // 0 until WriteHeader or the first Write
}

func (b *bufferedWriter) Header() http.Header { return b.w.Header() }

func (b *bufferedWriter) WriteHeader(code int) {
	// net/http keeps the first status too (and sends 1xx at once, which
	// no metrics handler writes).
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.buf.Write(p)
}

// WriteString spares the copy to []byte, as net/http's writer does.
func (b *bufferedWriter) WriteString(s string) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.buf.WriteString(s)
}

// send writes what the handler wrote, if anything: a handler that wrote
// nothing is answered by net/http as it would have been anyway.
func (b *bufferedWriter) send() {
	if b.status == 0 {
		return
	}
	if b.w.Header().Get("Content-Length") == "" && bodyAllowed(b.status) {
		b.w.Header().Set("Content-Length", strconv.Itoa(b.buf.Len()))
	}
	b.w.WriteHeader(b.status)
	if b.buf.Len() > 0 {
		_, _ = b.w.Write(b.buf.Bytes())
	}
}

// bodyAllowed is net/http's rule for which statuses may carry a body
// (and so a Content-Length).
func bodyAllowed(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}
