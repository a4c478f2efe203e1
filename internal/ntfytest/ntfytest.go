// Package ntfytest is an ntfy server for tests: an httptest server on
// 127.0.0.1 that reads every publish the way ntfy's server
// (binwiederhier/ntfy) does, records it, and answers ntfy's JSON, as a
// 2.16+ server (sequence ids kept, DELETE /<topic>/<sequence id>) or as
// 2.13 (neither), or fails in one of the ways a real ntfy, its proxy or
// the network can (see Fault).
//
// It stands in for ntfy.sh in every test that publishes, as barktest
// stands in for Bark. It imports nothing of lavender's but internal/testkit,
// so any package's tests may use it.
package ntfytest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// Topic is a topic name for tests that need one.
const Topic = "lavender-alerts"

// Version is the ntfy release a Server answers as.
type Version int

const (
	// V216 keeps sequence ids: X-Sequence-ID on a publish, POST and
	// DELETE on /<topic>/<sequence id>, and sequence_id in its answers.
	V216 Version = iota
	// V213 predates them: it ignores X-Sequence-ID and answers 404 to
	// /<topic>/<anything>, as every release before 2.16 does.
	V213
)

// MessageSizeLimit is ntfy's default message-size-limit: a body of this
// many bytes or more is taken for a file.
const MessageSizeLimit = 4096

// waitLimit bounds WaitPublishes: generous, so a loaded 2-core CI machine
// never turns a slow publish into a failure; it only ends a test that hangs.
const waitLimit = 30 * time.Second

// Publish is one request that reached the server (a publish, a delete or
// anything else), as ntfy reads it, with the answer it got.
type Publish struct {
	// The request as sent.
	Method     string
	RequestURI string // raw, escapes and query as the client wrote them
	Path       string
	Header     http.Header
	Body       []byte
	Referer    string // set when the client followed a redirect here

	// Auth is "bearer", "basic" or "" as the Authorization header says;
	// Token, or User and Password, what it carried.
	Auth, Token, User, Password string

	// What ntfy reads: the topic of a publish or delete route, the
	// sequence id from the path or X-Sequence-ID (2.16 only; SentSequenceID
	// holds the header even where the server ignores it), and the headers
	// decoded as ntfy decodes them (RFC 2047 words, spaces trimmed).
	Topic          string
	SequenceID     string
	SentSequenceID string
	Title          string
	RawTitle       string // X-Title as sent, before decoding
	Priority       int    // 1 to 5; 0 when none was given
	Tags           []string
	Click          string
	Message        string // the body as ntfy keeps it, spaces trimmed
	Attachment     bool   // the body was taken for a file (too large or not UTF-8)

	// The answer: HTTP status and ntfy's message id (a publish or delete
	// answered 200), or ntfy's error code. Status is 0 while the request
	// is unanswered (Hang) or when the connection was dropped.
	Status int
	ID     string
	Code   int
}

// Server is an ntfy server for one test. Its zero fault answers as ntfy
// does.
type Server struct {
	// URL is the base URL, http://127.0.0.1:port.
	URL string

	srv     *httptest.Server
	release chan struct{} // closed at cleanup: ends Hang

	mu       sync.Mutex
	version  Version
	token    string
	user     string
	password string
	fault    Fault
	pubs     []Publish
	next     int
	now      func() time.Time
}

// New starts an ntfy 2.16+ server on 127.0.0.1 with open topics, and stops
// it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{release: make(chan struct{}), now: time.Now}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	// Dropped connections are what some faults are for; the server's own
	// complaints about them are not news.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.Start()
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close stops the server: hanging requests end. Tests need not call it;
// cleanup does.
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
}

// TopicURL is the URL of topic on this server: a target line's URL.
func (s *Server) TopicURL(topic string) string { return s.URL + "/" + topic }

// Client is an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// SetVersion makes the server answer as v from now on.
func (s *Server) SetVersion(v Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = v
}

// RequireToken makes every topic need "Authorization: Bearer token"; a
// request without credentials gets 403 (40301), wrong ones 401 (40101),
// as ntfy answers with deny-all default access.
func (s *Server) RequireToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token, s.user, s.password = token, "", ""
}

// RequireBasic makes every topic need basic auth with user and password
// (or the password as a token, which ntfy also accepts).
func (s *Server) RequireBasic(user, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token, s.user, s.password = "", user, password
}

// SetNow sets the server's clock, for the time and expires it answers.
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetFault makes every later request answered by f (nil: ntfy's own
// answer).
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// Publishes returns every request received so far, in arrival order.
func (s *Server) Publishes() []Publish {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Publish, len(s.pubs))
	copy(out, s.pubs)
	return out
}

// Count is the number of requests received so far, answered or not.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pubs)
}

// WaitPublishes waits until at least n requests have arrived and returns
// them all. A request is recorded before it is answered, so it also tells
// a test that one has reached a Hang.
func (s *Server) WaitPublishes(t testing.TB, n int) []Publish {
	t.Helper()
	testkit.WaitFor(t, waitLimit, func() bool { return s.Count() >= n },
		fmt.Sprintf("%d requests at the ntfy server %s (have %d)", n, s.URL, s.Count()))
	return s.Publishes()
}

// DownURL is an http URL on a loopback port that refuses connections for
// the whole test: the "ntfy is down" fault (connection refused).
func DownURL(t testing.TB) string {
	t.Helper()
	return "http://" + testkit.RefusingAddr(t)
}

var (
	// topicPathRegex and sequencePathRegex are ntfy's publish routes
	// (server.go topicPathRegex; 2.16's /<topic>/<sequence id>).
	topicPathRegex    = regexp.MustCompile(`^/([-_A-Za-z0-9]{1,64})$`)
	sequencePathRegex = regexp.MustCompile(`^/([-_A-Za-z0-9]{1,64})/([-_A-Za-z0-9]{1,64})$`)
	sequenceIDRegex   = regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`)
)

type route int

const (
	routeNone route = iota
	routeHome
	routePublish
	routeDelete
)

// findRoute is ntfy's routing for what lavender sends, per version.
func findRoute(v Version, method, path string) (route, string, string) {
	if path == "/" && method == http.MethodGet {
		return routeHome, "", ""
	}
	isPublish := method == http.MethodPost || method == http.MethodPut
	if m := topicPathRegex.FindStringSubmatch(path); m != nil && isPublish {
		return routePublish, m[1], ""
	}
	if m := sequencePathRegex.FindStringSubmatch(path); m != nil && v == V216 {
		switch {
		case isPublish:
			return routePublish, m[1], m[2]
		case method == http.MethodDelete:
			return routeDelete, m[1], m[2]
		}
	}
	return routeNone, "", ""
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	version := s.version
	s.mu.Unlock()
	rt, topic, pathSeq := findRoute(version, r.Method, r.URL.Path)
	p := Publish{
		Method: r.Method, RequestURI: r.RequestURI, Path: r.URL.Path,
		Header: r.Header.Clone(), Body: body, Referer: r.Header.Get("Referer"),
		Topic: topic, SentSequenceID: r.Header.Get("X-Sequence-ID"),
	}
	p.Auth, p.Token, p.User, p.Password = parseAuth(r.Header.Get("Authorization"))
	var perr *ntfyError
	if rt == routePublish {
		perr = readPublish(&p, r, body, version, pathSeq)
	}
	if rt == routeDelete {
		p.SequenceID = pathSeq
	}

	s.mu.Lock()
	index := len(s.pubs)
	s.pubs = append(s.pubs, p)
	fault := s.fault
	s.mu.Unlock()

	e := &exchange{s: s, w: w, r: r, index: index, route: rt, perr: perr}
	if fault != nil {
		fault.answer(e)
		return
	}
	e.ntfyAnswer()
}

// readPublish reads a publish's headers and body as ntfy does
// (parsePublishParams, handlePublishBody).
func readPublish(p *Publish, r *http.Request, body []byte, v Version, pathSeq string) *ntfyError {
	p.RawTitle = r.Header.Get("X-Title")
	p.Title = readParam(r, "x-title", "title", "t")
	p.Click = readParam(r, "x-click", "click")
	for _, tag := range strings.Split(readParam(r, "x-tags", "tags", "tag", "ta"), ",") {
		if tag = strings.TrimSpace(tag); tag != "" {
			p.Tags = append(p.Tags, tag)
		}
	}
	if v == V216 {
		p.SequenceID = pathSeq
		if p.SequenceID == "" {
			p.SequenceID = readParam(r, "x-sequence-id", "sequence-id", "sid")
		}
		if p.SequenceID != "" && !sequenceIDRegex.MatchString(p.SequenceID) {
			return errorFor(40049)
		}
	}
	prio, ok := parsePriority(readParam(r, "x-priority", "priority", "prio", "p"))
	if !ok {
		return errorFor(40007)
	}
	p.Priority = prio
	if len(body) >= MessageSizeLimit || !utf8.Valid(body) {
		// ntfy peeks message-size-limit bytes; a body that fills them, or
		// is not UTF-8, is a file. ntfy.sh takes attachments.
		p.Attachment = true
		p.Message = "You received a file: attachment.txt"
		return nil
	}
	p.Message = strings.TrimSpace(string(body))
	if p.Message == "" {
		p.Message = "triggered"
	}
	return nil
}

// readParam is ntfy's readParam: the first header of names that is set,
// RFC 2047 decoded and trimmed, else the query parameter.
func readParam(r *http.Request, names ...string) string {
	for _, name := range names {
		value := r.Header.Get(name)
		if decoded, err := wordDecoder.DecodeHeader(value); err == nil {
			value = decoded
		}
		if value = strings.TrimSpace(value); value != "" {
			return value
		}
	}
	for _, name := range names {
		if value := strings.TrimSpace(r.URL.Query().Get(strings.ToLower(name))); value != "" {
			return value
		}
	}
	return ""
}

var wordDecoder mime.WordDecoder

// parsePriority is ntfy's util.ParsePriority.
func parsePriority(s string) (int, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return 0, true
	case "1", "min":
		return 1, true
	case "2", "low":
		return 2, true
	case "3", "default":
		return 3, true
	case "4", "high":
		return 4, true
	case "5", "max", "urgent":
		return 5, true
	}
	return 0, false
}

// parseAuth reads an Authorization header.
func parseAuth(h string) (kind, token, user, password string) {
	switch {
	case strings.HasPrefix(h, "Bearer "):
		return "bearer", strings.TrimPrefix(h, "Bearer "), "", ""
	case strings.HasPrefix(h, "Basic "):
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "Basic "))
		if err != nil {
			return "basic", "", "", ""
		}
		u, pw, _ := strings.Cut(string(raw), ":")
		return "basic", "", u, pw
	}
	return "", "", "", ""
}

// exchange is one request being answered; it records the answer.
type exchange struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	index int
	route route
	perr  *ntfyError // what ntfy would refuse the request with, if anything
}

func (e *exchange) publish() Publish {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	return e.s.pubs[e.index]
}

func (e *exchange) record(status int, change func(p *Publish)) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	e.s.pubs[e.index].Status = status
	if change != nil {
		change(&e.s.pubs[e.index])
	}
}

// ntfyAnswer answers as ntfy does: its web app at /, 404 elsewhere, the
// auth check, the request's own error, or the stored message.
func (e *exchange) ntfyAnswer() {
	switch e.route {
	case routeHome:
		e.page(http.StatusOK, "text/html; charset=utf-8", webApp)
		return
	case routeNone:
		e.fail(errorFor(40401))
		return
	}
	if err := e.s.checkAuth(e.publish()); err != nil {
		e.fail(err)
		return
	}
	if e.perr != nil {
		e.fail(e.perr)
		return
	}
	e.s.mu.Lock()
	e.s.next++
	id := messageID(e.s.next)
	now := e.s.now()
	version := e.s.version
	e.s.mu.Unlock()
	p := e.publish()
	m := message{ID: id, Time: now.Unix(), Expires: now.Add(12 * time.Hour).Unix(), Event: "message", Topic: p.Topic}
	if e.route == routeDelete {
		m.Event, m.Expires = "message_delete", 0
	} else {
		m.Title, m.Message, m.Priority, m.Tags, m.Click = p.Title, p.Message, p.Priority, p.Tags, p.Click
		if p.Attachment {
			m.Attachment = &attachment{Name: "attachment.txt", Type: "text/plain; charset=utf-8", Size: int64(len(p.Body)), URL: e.s.URL + "/file/" + id + ".txt"}
		}
	}
	if version == V216 {
		m.SequenceID = p.SequenceID
	}
	e.record(http.StatusOK, func(p *Publish) { p.ID = id })
	writeJSON(e.w, http.StatusOK, m)
}

// checkAuth is ntfy's verdict on the request's credentials for the topic.
func (s *Server) checkAuth(p Publish) *ntfyError {
	s.mu.Lock()
	token, user, password := s.token, s.user, s.password
	s.mu.Unlock()
	if token == "" && user == "" {
		return nil
	}
	switch {
	case p.Auth == "":
		return errorFor(40301)
	case token != "" && p.Auth == "bearer" && p.Token == token:
		return nil
	case token != "" && p.Auth == "basic" && p.User == "" && p.Password == token:
		return nil
	case user != "" && p.Auth == "basic" && p.User == user && p.Password == password:
		return nil
	}
	return errorFor(40101)
}

// messageID is a message id as ntfy makes them (12 letters and digits),
// counted rather than random so tests can name them.
func messageID(n int) string { return fmt.Sprintf("msg%09d", n) }

// message is ntfy's stored message, as its publish answers it (types.go).
type message struct {
	ID         string      `json:"id"`
	Time       int64       `json:"time"`
	Expires    int64       `json:"expires,omitempty"`
	Event      string      `json:"event"`
	Topic      string      `json:"topic"`
	SequenceID string      `json:"sequence_id,omitempty"`
	Title      string      `json:"title,omitempty"`
	Message    string      `json:"message,omitempty"`
	Priority   int         `json:"priority,omitempty"`
	Tags       []string    `json:"tags,omitempty"`
	Click      string      `json:"click,omitempty"`
	Attachment *attachment `json:"attachment,omitempty"`
}

type attachment struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
	Size int64  `json:"size,omitempty"`
	URL  string `json:"url"`
}

// webApp stands for ntfy's web app, which it serves at / (and which a
// target URL without its topic would publish to, were it a POST).
const webApp = "<!DOCTYPE html><html><head><title>ntfy</title></head><body><div id=\"root\"></div></body></html>"

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// ConfigDir writes *.ntfy.env files (name → content), and any token or
// password files among them, mode 0600 into a fresh dir, mode 0700, and
// returns it.
func ConfigDir(t testing.TB, files map[string]string) string {
	t.Helper()
	return testkit.PrivateDir(t, "ntfy", files)
}

// AddFiles writes more files, mode 0600, into an existing config dir, as a
// user does before a reload.
func AddFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	testkit.WritePrivate(t, dir, files)
}
