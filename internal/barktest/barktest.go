// Package barktest is a Bark server for tests: an httptest server on
// 127.0.0.1 that reads every push the way bark-server (Finb/bark-server)
// does, records it, and answers Bark's JSON, or fails in one of the ways a
// real Bark, its proxy or the network can (see Fault).
//
// It stands in for api.day.app in every test that pushes, as Alertmanager's
// notify/test package stands in for its receivers. It imports nothing of
// lavender's but internal/testkit, so any package's tests may use it.
package barktest

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// Key is the device key a Server accepts when New is given none.
const Key = "KEY"

// waitLimit bounds WaitPushes: generous, so a loaded 2-core CI machine
// never turns a slow push into a failure; it only ends a test that hangs.
const waitLimit = 30 * time.Second

// Push is one request that reached a push route, as bark-server reads it
// (a JSON batch with "device_keys" is one Push per key). A request that
// does not parse (bad JSON, no device key) is recorded too, with the
// request's fields and its 400.
//
// One request is not recorded because Go's HTTP server refuses it before
// any handler: a path with a malformed escape ("%zz"). It gets 400 in plain
// text where bark-server answers 400 in JSON ("url path parse failed").
type Push struct {
	// The request as sent.
	Method     string
	RequestURI string // raw, escapes as the client wrote them
	Path       string // RequestURI's raw path
	Header     http.Header
	RawBody    []byte
	Referer    string // set when the client followed a redirect here

	// Params holds every parameter after bark-server's merge (path over
	// form over query, or path over query over JSON), keys lowercased, values
	// unescaped, before any default is applied.
	Params map[string]string

	// What bark-server hands to Apple, defaults applied: Sound is "1107"
	// when unset, and a sound given without ".caf" gets it appended; a push
	// with no title, subtitle or body gets the body "Empty Message" (an
	// encrypted push does, for one: read Params["body"] to see what was sent).
	DeviceKey, ID            string
	Title, Subtitle, Body    string
	Sound, Group, URL, Level string
	IsArchive, Delete, Call  string
	Ciphertext, IV           string

	// The answer: HTTP status and Bark's message. Status is 0 while the
	// request is unanswered (Hang) or when the connection was dropped
	// (Reset, CloseConnection).
	Status  int
	Message string
}

// Encrypted says whether the push carries a ciphertext.
func (p Push) Encrypted() bool { return p.Ciphertext != "" }

// Server is a Bark server for one test. Its zero fault answers as
// bark-server with a working link to Apple does.
type Server struct {
	// URL is the base URL, http(s)://127.0.0.1:port.
	URL string

	srv     *httptest.Server
	release chan struct{} // closed at cleanup: ends Hang and idle talk
	conns   sync.WaitGroup

	mu        sync.Mutex
	keys      map[string]bool
	fault     Fault
	keyFaults map[string]Fault
	pushes    []Push
	idleTalks int
}

// New starts a plain-HTTP Bark server on 127.0.0.1 that knows the given
// device keys (Key if none), and stops it when the test ends.
func New(t testing.TB, keys ...string) *Server {
	t.Helper()
	return start(t, false, keys)
}

// NewTLS is New over HTTPS with httptest's certificate, which no client
// trusts unless given CertPool or Client: the "untrusted certificate" Bark.
func NewTLS(t testing.TB, keys ...string) *Server {
	t.Helper()
	return start(t, true, keys)
}

func start(t testing.TB, useTLS bool, keys []string) *Server {
	if len(keys) == 0 {
		keys = []string{Key}
	}
	s := &Server{release: make(chan struct{}), keys: map[string]bool{}, keyFaults: map[string]Fault{}}
	for _, k := range keys {
		s.keys[k] = true
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	// Refused handshakes and dropped connections are what the faults are
	// for; the server's own complaints about them are not news.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close stops the server: hanging requests end, idle talkers hang up.
// Tests need not call it; cleanup does.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.release:
		s.mu.Unlock()
		return
	default:
		close(s.release)
	}
	s.mu.Unlock()
	s.srv.Close()
	s.conns.Wait()
}

// Template is a lavender target line for key: "<URL>/<key>/$0".
func (s *Server) Template(key string) string { return s.URL + "/" + key + "/$0" }

// CertPool trusts a TLS server's certificate (nil for plain HTTP).
func (s *Server) CertPool() *x509.CertPool {
	if s.srv.Certificate() == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(s.srv.Certificate())
	return pool
}

// Client is an HTTP client that trusts the server's certificate.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// SetFault makes every later push answered by f (nil: Bark's own answer),
// except pushes to a key with a SetKeyFault of its own.
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// SetKeyFault makes pushes to one device key answered by f (nil: back to
// the server's fault). Each key keeps its own FailFirst count.
func (s *Server) SetKeyFault(key string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == nil {
		delete(s.keyFaults, key)
	} else {
		s.keyFaults[key] = f
	}
}

// Pushes returns every push received so far, in arrival order.
func (s *Server) Pushes() []Push {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Push, len(s.pushes))
	copy(out, s.pushes)
	return out
}

// Count is the number of pushes received so far, answered or not.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pushes)
}

// Accepted returns the pushes answered 200.
func (s *Server) Accepted() []Push {
	var out []Push
	for _, p := range s.Pushes() {
		if p.Status == http.StatusOK {
			out = append(out, p)
		}
	}
	return out
}

// WaitPushes waits until at least n pushes have arrived and returns them
// all. A push is recorded before it is answered, so it also tells a test
// that a push has reached a Hang.
func (s *Server) WaitPushes(t testing.TB, n int) []Push {
	t.Helper()
	testkit.WaitFor(t, waitLimit, func() bool { return s.Count() >= n },
		fmt.Sprintf("%d pushes at the Bark server %s (have %d)", n, s.URL, s.Count()))
	return s.Pushes()
}

// IdleTalks is how many times IdleTalk has written to an idle connection.
func (s *Server) IdleTalks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idleTalks
}

// DownURL is an http URL on a loopback port that refuses connections for
// the whole test: the "Bark is down" fault (connection refused).
func DownURL(t testing.TB) string {
	t.Helper()
	return "http://" + testkit.RefusingAddr(t)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rawPath, _, _ := strings.Cut(r.RequestURI, "?")
	rt := findRoute(r.Method, rawPath)
	switch rt.kind {
	case routeHome, routeHealth:
		io.WriteString(w, "ok")
		return
	case routePing:
		writeBark(w, http.StatusOK, "pong")
		return
	case routeNone:
		// fiber's 404 is plain text, not Bark's JSON.
		http.Error(w, rt.message, http.StatusNotFound)
		return
	}
	body, readErr := io.ReadAll(r.Body)
	base := Push{
		Method: r.Method, RequestURI: r.RequestURI, Path: rawPath,
		Header: r.Header.Clone(), RawBody: body, Referer: r.Header.Get("Referer"),
	}
	pr, err := parseRequest(r, rt, body)
	if readErr != nil {
		err = &requestError{400, "request bind failed: " + readErr.Error()}
	}
	var pushes []Push
	switch {
	case err != nil:
		pushes = []Push{base}
	case len(pr.deviceKeys) > 0:
		for _, k := range pr.deviceKeys {
			pushes = append(pushes, merge(base, pr.push(k)))
		}
	default:
		pushes = []Push{merge(base, pr.push(""))}
	}

	s.mu.Lock()
	first := len(s.pushes)
	s.pushes = append(s.pushes, pushes...)
	fault := s.fault
	if f, ok := s.keyFaults[pushes[0].DeviceKey]; ok {
		fault = f
	}
	s.mu.Unlock()

	ex := &exchange{s: s, w: w, r: r, index: first, n: len(pushes)}
	switch {
	case fault != nil:
		fault.answer(ex)
	case err != nil:
		re := err.(*requestError)
		ex.bark(re.status, re.message)
	case len(pr.deviceKeys) > 0:
		ex.batch()
	default:
		ex.barkAnswer()
	}
}

// merge puts what was read of the request into a parsed push.
func merge(base, p Push) Push {
	p.Method, p.RequestURI, p.Path = base.Method, base.RequestURI, base.Path
	p.Header, p.RawBody, p.Referer = base.Header, base.RawBody, base.Referer
	return p
}

// exchange is one request being answered; it records the answer in the
// pushes it produced.
type exchange struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	index int // the first of its pushes in s.pushes
	n     int
}

func (e *exchange) push() Push {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	return e.s.pushes[e.index]
}

func (e *exchange) record(status int, message string) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	for i := e.index; i < e.index+e.n; i++ {
		e.s.pushes[i].Status, e.s.pushes[i].Message = status, message
	}
}

// barkAnswer is bark-server's answer once the request has parsed: a
// device key it knows gets 200, anything else 400, in its wording (which
// names the key).
func (e *exchange) barkAnswer() {
	status, message := e.s.lookup(e.push().DeviceKey)
	e.bark(status, message)
}

func (s *Server) lookup(key string) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case key == "":
		return http.StatusBadRequest, "device key is empty"
	case !s.keys[key]:
		return http.StatusBadRequest, fmt.Sprintf("failed to get device token: failed to get [%s] device token from database", key)
	}
	return http.StatusOK, "success"
}

// batch answers a JSON push with "device_keys": 200 overall, one code per
// key in data.
func (e *exchange) batch() {
	type result struct {
		Code      int    `json:"code"`
		DeviceKey string `json:"device_key"`
		Message   string `json:"message,omitempty"`
	}
	var results []result
	e.s.mu.Lock()
	pushes := append([]Push(nil), e.s.pushes[e.index:e.index+e.n]...)
	e.s.mu.Unlock()
	for i, p := range pushes {
		code, msg := e.s.lookup(p.DeviceKey)
		res := result{Code: code, DeviceKey: p.DeviceKey}
		if code != http.StatusOK {
			res.Message = msg
		}
		results = append(results, res)
		e.s.mu.Lock()
		e.s.pushes[e.index+i].Status, e.s.pushes[e.index+i].Message = code, msg
		e.s.mu.Unlock()
	}
	writeJSON(e.w, http.StatusOK, barkBody{Code: 200, Message: "success", Data: results, Timestamp: time.Now().Unix()})
}

// bark answers Bark's JSON with HTTP status = code, as bark-server does.
func (e *exchange) bark(status int, message string) {
	e.record(status, message)
	writeBark(e.w, status, message)
}

type barkBody struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	Data      any    `json:"data,omitempty"`
	Timestamp int64  `json:"timestamp"`
}

func writeBark(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, barkBody{Code: status, Message: message, Timestamp: time.Now().Unix()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// ConfigDir writes *.bark.env files (name → content) mode 0600 into a
// fresh dir, mode 0700, and returns it: --bark.config-dir.
func ConfigDir(t testing.TB, files map[string]string) string {
	t.Helper()
	return testkit.PrivateDir(t, "bark", files)
}

// AddTargets writes more *.bark.env files, mode 0600, into an existing
// config dir, as a user does before a reload.
func AddTargets(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	testkit.WritePrivate(t, dir, files)
}
