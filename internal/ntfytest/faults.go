package ntfytest

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// A Fault answers a request in place of ntfy. The request is recorded (read
// as ntfy would) before the fault acts, whatever it does.
//
// "ntfy is down" is not a Fault but an address: DownURL.
type Fault interface {
	answer(e *exchange)
}

type faultFunc func(e *exchange)

func (f faultFunc) answer(e *exchange) { f(e) }

// ntfyError is ntfy's JSON error answer (server/errors.go errHTTP).
type ntfyError struct {
	Code     int    `json:"code"`
	HTTPCode int    `json:"http"`
	Message  string `json:"error"`
	Link     string `json:"link,omitempty"`
}

// errorTable holds ntfy's errors that a publish can meet, in its words.
var errorTable = map[int]ntfyError{
	40000: {40000, 400, "invalid request", ""},
	40007: {40007, 400, "invalid priority parameter", "https://ntfy.sh/docs/publish/#message-priority"},
	40009: {40009, 400, "invalid request: topic invalid", ""},
	40011: {40011, 400, "invalid request: message must be UTF-8 encoded", ""},
	40014: {40014, 400, "invalid request: attachments not allowed", "https://ntfy.sh/docs/config/#attachments"},
	// 40049 stands for 2.16's refusal of a malformed sequence id, whose
	// code the 2.13 source this copies cannot show.
	40049: {40049, 400, "invalid request: sequence ID invalid", ""},
	40101: {40101, 401, "unauthorized", "https://ntfy.sh/docs/publish/#authentication"},
	40301: {40301, 403, "forbidden", "https://ntfy.sh/docs/publish/#authentication"},
	40401: {40401, 404, "page not found", ""},
	41301: {41301, 413, "attachment too large, or bandwidth limit reached", "https://ntfy.sh/docs/publish/#limitations"},
	42901: {42901, 429, "limit reached: too many requests", "https://ntfy.sh/docs/publish/#limitations"},
	42905: {42905, 429, "limit reached: daily bandwidth reached", "https://ntfy.sh/docs/publish/#limitations"},
	42908: {42908, 429, "limit reached: daily message quota reached", "https://ntfy.sh/docs/publish/#limitations"},
	42909: {42909, 429, "limit reached: too many auth failures", "https://ntfy.sh/docs/publish/#limitations"},
	50001: {50001, 500, "internal server error", ""},
	50701: {50701, 507, "cannot publish to UnifiedPush topic without previously active subscriber", ""},
}

// errorFor is ntfy's error of code; a code not in the table gets its HTTP
// status from its first three digits and a generic text.
func errorFor(code int) *ntfyError {
	if e, ok := errorTable[code]; ok {
		return &e
	}
	return &ntfyError{Code: code, HTTPCode: code / 100, Message: "error " + strconv.Itoa(code)}
}

// fail answers ntfy's JSON error.
func (e *exchange) fail(err *ntfyError) {
	e.record(err.HTTPCode, func(p *Publish) { p.Code = err.Code })
	writeJSON(e.w, err.HTTPCode, err)
}

// page answers status with a body that is not ntfy's JSON.
func (e *exchange) page(status int, contentType, body string) {
	e.record(status, nil)
	if contentType != "" {
		e.w.Header().Set("Content-Type", contentType)
	}
	e.w.WriteHeader(status)
	e.w.Write([]byte(body))
}

// Error answers ntfy's JSON error of code (42901, 40101, 50001, …) with
// its HTTP status, whatever the request.
func Error(code int) Fault {
	return faultFunc(func(e *exchange) { e.fail(errorFor(code)) })
}

// ErrorText answers ntfy's JSON error of code with the error text msg:
// for the words a proxy or a later ntfy may use.
func ErrorText(code int, msg string) Fault {
	return faultFunc(func(e *exchange) {
		err := errorFor(code)
		err.Message = msg
		e.fail(err)
	})
}

// EchoRequest answers ntfy's JSON error of code with a text that quotes
// the request's Authorization header and URI, as a careless proxy or a
// debug build might: for tests that lavender never repeats them.
func EchoRequest(code int) Fault {
	return faultFunc(func(e *exchange) {
		err := errorFor(code)
		err.Message = "refused " + e.r.RequestURI + " with " + e.r.Header.Get("Authorization")
		e.fail(err)
	})
}

// Page answers status with a body that is not ntfy's JSON: a captive
// portal, a proxy's error page, another web app.
func Page(status int, contentType, body string) Fault {
	return faultFunc(func(e *exchange) { e.page(status, contentType, body) })
}

// WebApp answers 200 with ntfy's web app page, as ntfy answers a GET of
// its root: a 2xx that is no publish.
func WebApp() Fault { return Page(http.StatusOK, "text/html; charset=utf-8", webApp) }

// Redirect answers code (301, 302, 303, 307 or 308) with Location set to
// the same request URI on base (another Server's URL, say). Whether the
// client followed is that server's Count.
func Redirect(code int, base string) Fault {
	return faultFunc(func(e *exchange) {
		e.record(code, nil)
		e.w.Header().Set("Location", base+e.r.RequestURI)
		e.w.WriteHeader(code)
	})
}

// Hang never answers: the request waits until the client gives up (its
// context ends) or the test ends.
func Hang() Fault {
	return faultFunc(func(e *exchange) {
		select {
		case <-e.r.Context().Done():
		case <-e.s.release:
		}
	})
}

// Slow answers as ntfy does after d, unless the client gives up first.
func Slow(d time.Duration) Fault {
	return faultFunc(func(e *exchange) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			e.ntfyAnswer()
		case <-e.r.Context().Done():
		case <-e.s.release:
		}
	})
}

// CloseConnection closes the connection (a FIN, so the client reads EOF)
// once the request is read, instead of answering: the server went away.
func CloseConnection() Fault {
	return faultFunc(func(e *exchange) {
		if conn := e.hijack(); conn != nil {
			conn.Close()
		}
	})
}

// Reset drops the connection with a TCP RST (SO_LINGER 0) once the request
// is read, instead of answering.
func Reset() Fault {
	return faultFunc(func(e *exchange) {
		if conn := e.hijack(); conn != nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			conn.Close()
		}
	})
}

// Truncated answers 200 with a Content-Length longer than the body it
// sends, then closes: an answer that broke off.
func Truncated() Fault {
	return faultFunc(func(e *exchange) {
		conn := e.hijack()
		if conn == nil {
			return
		}
		e.record(http.StatusOK, nil)
		conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{\"id\":\"abc"))
		conn.Close()
	})
}

// FailFirst answers the first n requests it sees with fail, and every
// later one as ntfy does.
func FailFirst(n int, fail Fault) Fault {
	var mu sync.Mutex
	left := n
	return faultFunc(func(e *exchange) {
		mu.Lock()
		failing := left > 0
		if failing {
			left--
		}
		mu.Unlock()
		if failing {
			fail.answer(e)
		} else {
			e.ntfyAnswer()
		}
	})
}

// hijack takes the connection from the HTTP server; the request has been
// read in full already.
func (e *exchange) hijack() net.Conn { return testkit.Hijack(e.w, e.r) }
