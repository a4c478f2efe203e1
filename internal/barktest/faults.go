package barktest

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// A Fault answers a push in place of Bark. The push is recorded (parsed as
// bark-server would) before the fault acts, whatever it does.
//
// "Bark is down" is not a Fault but an address: DownURL. An untrusted
// certificate is a server: NewTLS.
type Fault interface {
	answer(e *exchange)
}

type faultFunc func(e *exchange)

func (f faultFunc) answer(e *exchange) { f(e) }

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

// Hold answers each push as Bark does once release is closed: a slow
// Bark, for a stop that comes while a push is on the wire. A client that
// gives up first gets no answer.
func Hold(release <-chan struct{}) Fault {
	return faultFunc(func(e *exchange) {
		select {
		case <-release:
			e.barkAnswer()
		case <-e.r.Context().Done():
		case <-e.s.release:
		}
	})
}

// Status answers Bark's JSON with the given HTTP status and message, as
// bark-server does when Apple refuses a push (500 "push failed: …") or a
// proxy in front of it limits (429).
func Status(code int, message string) Fault {
	return faultFunc(func(e *exchange) { e.bark(code, message) })
}

// EchoPath answers code with a message that quotes the request's raw path,
// device key and message included, as bark-server's errors can ("failed to
// get [KEY] device token", "push failed: …"): for tests that lavender never
// repeats what Bark says.
func EchoPath(code int) Fault {
	return faultFunc(func(e *exchange) { e.bark(code, "push failed: "+e.push().Path) })
}

// BarkCode answers HTTP 200 with a JSON code that is not 200: a Bark
// behind a proxy that rewrites statuses.
func BarkCode(code int, message string) Fault {
	return faultFunc(func(e *exchange) {
		e.record(http.StatusOK, message)
		writeJSON(e.w, http.StatusOK, barkBody{Code: code, Message: message})
	})
}

// PlainOK answers 200 with the plain-text body "ok", not Bark's JSON: a
// captive portal, a health endpoint, or a proxy that swallowed the push.
func PlainOK() Fault { return PlainText(http.StatusOK, "ok") }

// PlainText answers status with a text/plain body.
func PlainText(status int, body string) Fault {
	return faultFunc(func(e *exchange) {
		e.record(status, body)
		e.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		e.w.WriteHeader(status)
		e.w.Write([]byte(body))
	})
}

// Redirect answers code (301, 302, 303, 307 or 308) with Location set to
// the same request URI on base (another Server's URL, say). Whether the
// client followed is that server's Count; the Referer it sent is in its
// pushes.
func Redirect(code int, base string) Fault {
	return faultFunc(func(e *exchange) {
		e.record(code, "")
		e.w.Header().Set("Location", base+e.r.RequestURI)
		e.w.WriteHeader(code)
	})
}

// Reset drops the connection with a TCP RST (SO_LINGER 0) once the
// request is read, instead of answering.
func Reset() Fault {
	return faultFunc(func(e *exchange) {
		if conn := e.hijack(); conn != nil {
			raw := conn
			if tc, ok := conn.(*tls.Conn); ok {
				raw = tc.NetConn()
			}
			if tc, ok := raw.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			// The raw socket: a TLS close_notify first would read as EOF.
			raw.Close()
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

// idleTalkDelay is how long IdleTalk waits after its answer before it
// talks, so the client has put the connection back in its idle pool. It is
// an ordering aid, not an assertion: talk that comes early is still
// unsolicited.
const idleTalkDelay = 100 * time.Millisecond

// IdleTalk answers Bark's success on a keep-alive connection, then, once
// the connection is idle, writes unsolicited bytes on it that begin with
// the push's device key. Go's HTTP client reports such bytes with
// log.Printf ("Unsolicited response received on idle HTTP channel starting
// with …"), that is, on the process's stderr outside any logger: for tests
// that nothing, and no secret, reaches stderr that way. The connection
// stays open until the test ends; IdleTalks counts the writes.
func IdleTalk() Fault {
	return faultFunc(func(e *exchange) {
		key := e.push().DeviceKey
		body := fmt.Sprintf(`{"code":200,"message":"success","timestamp":%d}`+"\n", time.Now().Unix())
		conn := e.hijack()
		if conn == nil {
			return
		}
		e.record(http.StatusOK, "success")
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		// Close may have begun: it waits for the talkers it knows of, so a
		// talker starts only while the server is open.
		e.s.mu.Lock()
		select {
		case <-e.s.release:
			e.s.mu.Unlock()
			conn.Close()
			return
		default:
			e.s.conns.Add(1)
		}
		e.s.mu.Unlock()
		go func() {
			defer e.s.conns.Done()
			defer conn.Close()
			select {
			case <-time.After(idleTalkDelay):
			case <-e.s.release:
				return
			}
			if _, err := fmt.Fprintf(conn, "%s: unsolicited bytes on an idle connection (device key %s)\r\n", key, key); err == nil {
				e.s.mu.Lock()
				e.s.idleTalks++
				e.s.mu.Unlock()
			}
			<-e.s.release
		}()
	})
}

// FailFirst answers the first n pushes it sees with fail, and every later
// one as Bark does. Give each device key its own with SetKeyFault to fail
// each key's first n.
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
			e.barkAnswer()
		}
	})
}

// hijack takes the connection from the HTTP server; the request has been
// read in full already.
func (e *exchange) hijack() net.Conn { return testkit.Hijack(e.w, e.r) }
