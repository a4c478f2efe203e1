package ntfy

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lavender-ml/lavender/internal/ntfytest"
	"github.com/lavender-ml/lavender/notify"
)

// TestPublishOnTheWire: what ntfy reads back of each push is what the
// message said, whatever its characters.
func TestPublishOnTheWire(t *testing.T) {
	const (
		family   = "\U0001F468\u200D\U0001F469\u200D\U0001F467"
		scotland = "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F"
	)
	srv := ntfytest.New(t)
	n := notifier(t, srv.TopicURL(ntfytest.Topic), nil)
	tests := []struct {
		name          string
		msg           notify.Message
		rawTitle      string // X-Title as sent; "-": not checked
		title, body   string // as ntfy reads them
		priority      int
		tags          []string
		click, seqID  string
		wantNoHeaders []string
	}{
		{
			name:     "plain ASCII title goes plain",
			msg:      notify.Message{Text: "[lavender-2] swap 54% full (16.3/32.0 GB)", Title: "swap on gpu-1", Level: notify.LevelActive},
			rawTitle: "swap on gpu-1", title: "swap on gpu-1", body: "[lavender-2] swap 54% full (16.3/32.0 GB)", priority: 3,
			wantNoHeaders: []string{"X-Tags", "X-Click", "X-Sequence-ID"},
		},
		{
			name:     "UTF-8 and emoji title goes RFC 2047",
			msg:      notify.Message{Text: "run done " + family + " " + scotland + " \u2764\uFE0F", Title: "Überhitzt — GPU " + family},
			rawTitle: "-", title: "Überhitzt — GPU " + family, body: "run done " + family + " " + scotland + " \u2764\uFE0F", priority: 2,
		},
		{
			name:     "ASCII that looks like an encoded word arrives as written",
			msg:      notify.Message{Text: "x", Title: "=?UTF-8?b?aGk=?= not a word"},
			rawTitle: "-", title: "=?UTF-8?b?aGk=?= not a word", body: "x", priority: 2,
		},
		{
			name:     "a long non-ASCII title spans several encoded words",
			msg:      notify.Message{Text: "x", Title: strings.Repeat("ä€", 40)},
			rawTitle: "-", title: strings.Repeat("ä€", 40), body: "x", priority: 2,
		},
		{
			name:     "newlines and controls in a title become spaces, a bidi override goes",
			msg:      notify.Message{Text: "line one\nline two", Title: "a\nb\tc\u202Ed"},
			rawTitle: "a b c" + "d", title: "a b cd", body: "line one\nline two", priority: 2,
		},
		{
			name:     "tags, click and the sequence id",
			msg:      notify.Message{Text: "x", ID: "0123abcd", URL: "https://grafana.example/d/x?var=a&b=c", Tags: []string{"warning", "gpu", "a,b", " ", "warning", "flame🔥"}, Level: notify.LevelCritical},
			rawTitle: "", title: "", body: "x", priority: 5,
			tags: []string{"warning", "gpu", "a b", "flame🔥"}, click: "https://grafana.example/d/x?var=a&b=c", seqID: "0123abcd",
		},
		{
			name:     "an incident id unsafe in a path is hashed",
			msg:      notify.Message{Text: "x", ID: "alert/with spaces", Level: notify.LevelTimeSensitive},
			rawTitle: "", body: "x", priority: 4, seqID: SequenceID("alert/with spaces"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := srv.Count()
			mustPush(t, n, tt.msg)
			got := srv.Publishes()[before:]
			if len(got) != 1 {
				t.Fatalf("server got %d requests", len(got))
			}
			p := got[0]
			if p.Method != http.MethodPost || p.Path != "/"+ntfytest.Topic || strings.Contains(p.RequestURI, "?") {
				t.Errorf("request %s %s, want POST /%s without a query", p.Method, p.RequestURI, ntfytest.Topic)
			}
			if tt.rawTitle != "-" && p.RawTitle != tt.rawTitle {
				t.Errorf("X-Title sent %q, want %q", p.RawTitle, tt.rawTitle)
			}
			for _, v := range p.Header {
				for _, s := range v {
					if !isPrintableASCII(s) {
						t.Errorf("a header value is not printable ASCII: %q", s)
					}
				}
			}
			if p.Title != tt.title || p.Message != tt.body || p.Priority != tt.priority || p.Click != tt.click || p.SequenceID != tt.seqID {
				t.Errorf("ntfy read title %q body %q priority %d click %q sequence %q\nwant title %q body %q priority %d click %q sequence %q",
					p.Title, p.Message, p.Priority, p.Click, p.SequenceID, tt.title, tt.body, tt.priority, tt.click, tt.seqID)
			}
			if !slices.Equal(p.Tags, tt.tags) {
				t.Errorf("tags %q, want %q", p.Tags, tt.tags)
			}
			for _, h := range tt.wantNoHeaders {
				if _, ok := p.Header[h]; ok {
					t.Errorf("header %s sent: %q", h, p.Header.Get(h))
				}
			}
			if p.Header.Get("Authorization") != "" || p.Auth != "" {
				t.Errorf("an open topic got credentials")
			}
			if r, ok := n.LastReply(); !ok || r.ID != p.ID || r.Event != "message" {
				t.Errorf("LastReply = %+v %v, want id %q", r, ok, p.ID)
			}
		})
	}
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func TestPriority(t *testing.T) {
	tests := []struct {
		level string
		want  int
	}{
		{"", 2}, {notify.LevelPassive, 2}, {notify.LevelActive, 3},
		{notify.LevelTimeSensitive, 4}, {notify.LevelCritical, 5}, {"bogus", 3},
	}
	for _, tt := range tests {
		if got := Priority(tt.level); got != tt.want {
			t.Errorf("Priority(%q) = %d, want %d", tt.level, got, tt.want)
		}
	}
}

func TestTags(t *testing.T) {
	tests := []struct {
		in, want []string
	}{
		{nil, nil},
		{[]string{"", " ", "\n"}, nil},
		{[]string{"rotating_light", "swap", "rotating_light"}, []string{"rotating_light", "swap"}},
		{[]string{"a,b", "c\nd", "e\u202Ef"}, []string{"a b", "c d", "ef"}},
		{[]string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}, []string{"1", "2", "3", "4", "5", "6", "7", "8"}},
		{[]string{strings.Repeat("x", 100)}, []string{strings.Repeat("x", 61) + "…"}},
	}
	for _, tt := range tests {
		if got := Tags(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Tags(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestBodyLimit: ntfy takes a body that fills its 4096-byte peek for a
// file; every text, however long, arrives as a message, cut where no emoji
// is split.
func TestBodyLimit(t *testing.T) {
	const family = "\U0001F468\u200D\U0001F469\u200D\U0001F467" // 18 bytes
	srv := ntfytest.New(t)
	n := notifier(t, srv.TopicURL(ntfytest.Topic), nil)
	tests := []struct {
		name, text, want string
	}{
		{"4095 bytes go whole", strings.Repeat("a", 4095), strings.Repeat("a", 4095)},
		{"4096 bytes are cut", strings.Repeat("a", 4096), strings.Repeat("a", 4092) + "…"},
		{"an emoji across the cut goes whole", strings.Repeat("a", 4085) + family, strings.Repeat("a", 4085) + "…"},
		{"invalid UTF-8 is repaired, never a file", "ok \xff\xfe end", "ok \uFFFD end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := srv.Count()
			mustPush(t, n, notify.Message{Text: tt.text})
			p := srv.Publishes()[before]
			if p.Attachment {
				t.Fatalf("ntfy took the %d-byte body for a file", len(p.Body))
			}
			if len(p.Body) > MaxMessageBytes || !utf8.Valid(p.Body) {
				t.Errorf("body of %d bytes, valid UTF-8 %v", len(p.Body), utf8.Valid(p.Body))
			}
			if p.Message != tt.want {
				t.Errorf("message %q…(%d bytes), want %d bytes", p.Message[:min(20, len(p.Message))], len(p.Message), len(tt.want))
			}
		})
	}
	// The stand-in's own rule, so that the test above means something.
	req, _ := http.NewRequest(http.MethodPost, srv.TopicURL(ntfytest.Topic), strings.NewReader(strings.Repeat("a", ntfytest.MessageSizeLimit)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if last := srv.Publishes()[srv.Count()-1]; !last.Attachment {
		t.Error("ntfytest did not take a 4096-byte body for a file")
	}
}

// TestAuthorization: the credential goes in the Authorization header,
// never in the URL.
func TestAuthorization(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*ntfytest.Server)
		opts  string
		files map[string]string
		env   map[string]string
		auth  string
	}{
		{"token file", func(s *ntfytest.Server) { s.RequireToken(testToken) }, "token_file=ntfy.token", map[string]string{"ntfy.token": testToken + "\n"}, nil, "bearer"},
		{"token variable", func(s *ntfytest.Server) { s.RequireToken(testToken) }, "token_env=LAVENDER_TEST_NTFY_TOKEN", nil, map[string]string{"LAVENDER_TEST_NTFY_TOKEN": testToken}, "bearer"},
		{"user and password file", func(s *ntfytest.Server) { s.RequireBasic("phil", "s3cret pass") }, "user=phil password_file=pw", map[string]string{"pw": "s3cret pass\n"}, nil, "basic"},
		{"user and password variable", func(s *ntfytest.Server) { s.RequireBasic("phil", "Pa55word!") }, "user=phil password_env=LAVENDER_TEST_NTFY_PW", nil, map[string]string{"LAVENDER_TEST_NTFY_PW": "Pa55word!"}, "basic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			srv := ntfytest.New(t)
			tt.setup(srv)
			n := notifier(t, srv.TopicURL(ntfytest.Topic)+" "+tt.opts, tt.files)
			mustPush(t, n, notify.Message{Text: "hello", ID: "abc"})
			mustPush(t, n, notify.Message{ID: "abc", Delete: true})
			for _, p := range srv.Publishes() {
				if p.Auth != tt.auth || p.Status != http.StatusOK {
					t.Errorf("%s %s: auth %q status %d, want %q 200", p.Method, p.Path, p.Auth, p.Status, tt.auth)
				}
				if strings.Contains(p.RequestURI, "?") {
					t.Errorf("request URI %q has a query", p.RequestURI)
				}
			}
		})
	}
}

// TestSequences: which requests a push, an update, a resolve and a delete
// become on a 2.16+ server and on an older one, in each sequence mode.
func TestSequences(t *testing.T) {
	const id = "0f1e2d3c4b5a6978"
	steps := []notify.Message{
		{Text: "swap 54%", Title: "swap on gpu-1", ID: id, Level: notify.LevelActive},
		{Text: "swap 71%", Title: "swap on gpu-1", ID: id, Level: notify.LevelTimeSensitive},
		{Text: "swap back to 10%", Title: "swap on gpu-1 back", ID: id, Resolved: true},
		{ID: id, Delete: true},
	}
	tests := []struct {
		name     string
		version  ntfytest.Version
		mode     string
		requests []string // method, path, sequence id ntfy kept, title
		support  string
	}{
		{
			name: "2.16, auto", version: ntfytest.V216, mode: "auto", support: "yes",
			requests: []string{
				"POST /t " + id + " swap on gpu-1",
				"POST /t " + id + " swap on gpu-1",
				"POST /t " + id + " swap on gpu-1 back",
				"DELETE /t/" + id + " " + id + " ",
			},
		},
		{
			name: "2.16, on", version: ntfytest.V216, mode: "on", support: "yes",
			requests: []string{
				"POST /t " + id + " swap on gpu-1",
				"POST /t " + id + " swap on gpu-1",
				"POST /t " + id + " swap on gpu-1 back",
				"DELETE /t/" + id + " " + id + " ",
			},
		},
		{
			// Every push is a new notification; the resolved one names the
			// first push's title; the delete sends nothing.
			name: "2.16, off", version: ntfytest.V216, mode: "off", support: "no",
			requests: []string{
				"POST /t  swap on gpu-1",
				"POST /t  swap on gpu-1",
				"POST /t  Resolved: swap on gpu-1",
			},
		},
		{
			// The header is sent and ignored; the answers carry no
			// sequence_id, so the notifier learns, and acts as with off.
			name: "2.13, auto", version: ntfytest.V213, mode: "auto", support: "no",
			requests: []string{
				"POST /t  swap on gpu-1",
				"POST /t  swap on gpu-1",
				"POST /t  Resolved: swap on gpu-1",
			},
		},
		{
			// Told the server keeps sequence ids, the notifier believes it:
			// the delete gets ntfy's 404, which the last step reports.
			name: "2.13, on", version: ntfytest.V213, mode: "on", support: "yes",
			requests: []string{
				"POST /t  swap on gpu-1",
				"POST /t  swap on gpu-1",
				"POST /t  swap on gpu-1 back",
				"DELETE /t/" + id + "  ",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := ntfytest.New(t)
			srv.SetVersion(tt.version)
			n := notifier(t, srv.TopicURL("t")+" sequence="+tt.mode, nil)
			for i, m := range steps {
				_, err := push(t, n, relaxedTimeout, m)
				wantErr := tt.version == ntfytest.V213 && tt.mode == "on" && m.Delete
				if (err != nil) != wantErr {
					t.Fatalf("step %d: err = %v, want an error %v", i, err, wantErr)
				}
				if wantErr && err.Error() != "HTTP 404" {
					t.Errorf("step %d: err = %v, want HTTP 404", i, err)
				}
			}
			var got []string
			for _, p := range srv.Publishes() {
				got = append(got, p.Method+" "+p.Path+" "+p.SequenceID+" "+p.Title)
				if tt.mode != "off" && p.Method == http.MethodPost && p.SentSequenceID != id {
					t.Errorf("X-Sequence-ID sent %q, want %q", p.SentSequenceID, id)
				}
				if tt.mode == "off" && p.SentSequenceID != "" {
					t.Errorf("sequence=off sent X-Sequence-ID %q", p.SentSequenceID)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.requests, "\n") {
				t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.requests, "\n"))
			}
			if s := n.SequenceSupport(); s != tt.support {
				t.Errorf("SequenceSupport = %q, want %q", s, tt.support)
			}
		})
	}
}

// TestDeleteOnAnOldServerLearns: in auto mode a delete before any push
// asks the server; ntfy's own 404 says it has no sequence ids, which is
// no failure (there is nothing to delete by), and later deletes send
// nothing.
func TestDeleteOnAnOldServerLearns(t *testing.T) {
	srv := ntfytest.New(t)
	srv.SetVersion(ntfytest.V213)
	n := notifier(t, srv.TopicURL("t"), nil)
	for range 2 {
		mustPush(t, n, notify.Message{ID: "abc", Delete: true})
	}
	if c := srv.Count(); c != 1 {
		t.Errorf("the server got %d requests, want 1", c)
	}
	if s := n.SequenceSupport(); s != "no" {
		t.Errorf("SequenceSupport = %q, want no", s)
	}
	// A 404 that is not ntfy's (a proxy's page) is a failure.
	other := ntfytest.New(t)
	other.SetFault(ntfytest.Page(http.StatusNotFound, "text/html", "<h1>Not Found</h1>"))
	n2 := notifier(t, other.TopicURL("t"), nil)
	if _, err := push(t, n2, relaxedTimeout, notify.Message{ID: "abc", Delete: true}); err == nil || err.Error() != "HTTP 404" {
		t.Errorf("delete through a proxy's 404: err = %v, want HTTP 404", err)
	}
}

// TestResolvedTitle: on a server without sequence ids a resolved push
// names the push it resolves.
func TestResolvedTitle(t *testing.T) {
	srv := ntfytest.New(t)
	srv.SetVersion(ntfytest.V213)
	first := time.Date(2030, 1, 2, 14, 3, 0, 0, time.UTC)
	srv.SetNow(func() time.Time { return first })
	tests := []struct {
		name   string
		pushes []notify.Message
		want   string
	}{
		{"titled", []notify.Message{{Text: "a", Title: "disk full", ID: "i1"}, {Text: "b", Title: "disk ok", ID: "i1", Resolved: true}}, "Resolved: disk full"},
		{"untitled", []notify.Message{{Text: "a", ID: "i2"}, {Text: "b", ID: "i2", Resolved: true}}, "Resolved: push of 14:03 UTC"},
		{"first push unknown", []notify.Message{{Text: "b", Title: "disk ok", ID: "i3", Resolved: true}}, "Resolved: disk ok"},
		{"nothing known", []notify.Message{{Text: "b", ID: "i4", Resolved: true}}, "Resolved"},
		{"already says so", []notify.Message{{Text: "b", Title: "Resolved: disk ok", ID: "i5", Resolved: true}}, "Resolved: disk ok"},
	}
	n := notifier(t, srv.TopicURL("t"), nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, m := range tt.pushes {
				mustPush(t, n, m)
			}
			last := srv.Publishes()[srv.Count()-1]
			if last.Title != tt.want {
				t.Errorf("title %q, want %q", last.Title, tt.want)
			}
		})
	}
	f, l, ok := n.Incident("i1")
	if !ok || f.ID == l.ID || f.Title != "disk full" || f.Time != first.Unix() || l.Title != "Resolved: disk full" {
		t.Errorf("Incident(i1) = %+v, %+v, %v", f, l, ok)
	}
}

// TestTitleOption: title= replaces every push's title.
func TestTitleOption(t *testing.T) {
	srv := ntfytest.New(t)
	n := notifier(t, srv.TopicURL("t")+` title="GPU box 2"`, nil)
	mustPush(t, n, notify.Message{Text: "a", Title: "swap"})
	if p := srv.Publishes()[0]; p.Title != "GPU box 2" {
		t.Errorf("title %q, want GPU box 2", p.Title)
	}
}

// TestIncidentMemoryIsBounded: the per-incident memory keeps the newest
// incidents only, and forgets a deleted one.
func TestIncidentMemoryIsBounded(t *testing.T) {
	srv := ntfytest.New(t)
	n := notifier(t, srv.TopicURL("t"), nil)
	for i := range maxIncidents + 3 {
		n.remember("inc"+strconv.Itoa(i), Reply{ID: strconv.Itoa(i)}, false)
	}
	if _, _, ok := n.Incident("inc2"); ok {
		t.Error("the oldest incidents were kept")
	}
	if f, _, ok := n.Incident("inc3"); !ok || f.ID != "3" {
		t.Errorf("Incident(inc3) = %+v %v", f, ok)
	}
	if len(n.incidents) != maxIncidents || len(n.order) != maxIncidents {
		t.Errorf("%d incidents, %d in order, want %d", len(n.incidents), len(n.order), maxIncidents)
	}
	mustPush(t, n, notify.Message{Text: "x", ID: "gone"})
	mustPush(t, n, notify.Message{ID: "gone", Delete: true})
	if _, _, ok := n.Incident("gone"); ok {
		t.Error("a deleted incident is still remembered")
	}
}

func TestFailureClasses(t *testing.T) {
	srv := ntfytest.New(t)
	tests := []struct {
		name      string
		fault     ntfytest.Fault
		url       string // "" = srv's topic
		class     string // "" = accepted
		retryable bool
		detail    string // what Detail must start with
		saw       string // what Saw must start with
		timeout   time.Duration
	}{
		{name: "200"},
		{name: "400 bad request", fault: ntfytest.Error(40000), class: "HTTP 400", detail: "ntfy 40000: invalid request"},
		{name: "400 attachments off", fault: ntfytest.Error(40014), class: "HTTP 400", detail: "ntfy 40014: invalid request: attachments not allowed"},
		{name: "401 is never retried", fault: ntfytest.Error(40101), class: "HTTP 401", detail: "ntfy 40101: unauthorized"},
		{name: "403", fault: ntfytest.Error(40301), class: "HTTP 403", detail: "ntfy 40301: forbidden"},
		{name: "404 wrong path", url: srv.URL + "/a/b/c", class: "HTTP 404", detail: "ntfy 40401: page not found"},
		{name: "408", fault: ntfytest.Page(408, "text/plain", "timeout"), class: "HTTP 408", retryable: true},
		{name: "413", fault: ntfytest.Error(41301), class: "HTTP 413", detail: "ntfy 41301:"},
		{name: "429 too many requests", fault: ntfytest.Error(42901), class: "HTTP 429", retryable: true, detail: "ntfy 42901: limit reached: too many requests"},
		{name: "429 daily quota", fault: ntfytest.Error(42908), class: "HTTP 429", detail: "ntfy 42908: limit reached: daily message quota reached"},
		{name: "429 auth failures", fault: ntfytest.Error(42909), class: "HTTP 429", detail: "ntfy 42909:"},
		{name: "429 without ntfy's body", fault: ntfytest.Page(429, "text/html", "<h1>slow down</h1>"), class: "HTTP 429", retryable: true},
		{name: "500", fault: ntfytest.Error(50001), class: "HTTP 500", retryable: true, detail: "ntfy 50001: internal server error"},
		{name: "502 from a proxy", fault: ntfytest.Page(502, "text/html", "<h1>Bad Gateway</h1>"), class: "HTTP 502", retryable: true},
		{name: "503", fault: ntfytest.ErrorText(50301, "service unavailable"), class: "HTTP 503", retryable: true, detail: "ntfy 50301: service unavailable"},
		{name: "507 UnifiedPush", fault: ntfytest.Error(50701), class: "HTTP 507", retryable: true},
		{name: "302", fault: ntfytest.Redirect(http.StatusFound, "https://elsewhere.example"), class: "redirect", saw: "HTTP 302 to https://elsewhere.example"},
		{name: "200 web app", fault: ntfytest.WebApp(), class: "not-ntfy", saw: "HTTP 200, text/html; charset=utf-8, body \"<!DOCTYPE html>"},
		{name: "200 plain ok", fault: ntfytest.Page(200, "", "ok"), class: "not-ntfy", saw: "HTTP 200, "},
		{name: "200 JSON that is no message", fault: ntfytest.Page(200, "application/json", `{"healthy":true}`), class: "not-ntfy"},
		{name: "answer broke off", fault: ntfytest.Truncated(), class: "reading answer: connection closed", retryable: true},
		{name: "hang", fault: ntfytest.Hang(), class: "timeout", retryable: true, timeout: hangTimeout},
		{name: "slow", fault: ntfytest.Slow(time.Minute), class: "timeout", retryable: true, timeout: hangTimeout},
		{name: "closed port", url: ntfytest.DownURL(t) + "/t", class: "connection refused", retryable: true},
		{name: "closed connection", fault: ntfytest.CloseConnection(), class: "connection closed", retryable: true},
		{name: "reset connection", fault: ntfytest.Reset(), class: "connection reset", retryable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.SetFault(tt.fault)
			u := tt.url
			if u == "" {
				u = srv.TopicURL("t")
			}
			timeout := relaxedTimeout
			if tt.timeout != 0 {
				timeout = tt.timeout
			}
			n := notifier(t, u, nil)
			retry, err := push(t, n, timeout, notify.Message{Text: "hello"})
			class := ""
			if err != nil {
				class = err.Error()
			}
			if class != tt.class || retry != tt.retryable {
				t.Fatalf("got class %q retryable %v, want %q %v (%#v)", class, retry, tt.class, tt.retryable, err)
			}
			if err == nil {
				return
			}
			var pe *notify.Error
			if !errors.As(err, &pe) {
				t.Fatalf("%T is not a *notify.Error", err)
			}
			if !strings.HasPrefix(pe.Detail, tt.detail) || !strings.HasPrefix(pe.Saw, tt.saw) {
				t.Errorf("detail %q saw %q, want them to start %q and %q", pe.Detail, pe.Saw, tt.detail, tt.saw)
			}
			if pe.Retryable != retry {
				t.Errorf("Retryable %v, retry %v", pe.Retryable, retry)
			}
		})
	}
}

// TestCanceledContext: a push whose context ends first is "canceled" or
// "timeout", never sent twice.
func TestCanceledContext(t *testing.T) {
	srv := ntfytest.New(t)
	srv.SetFault(ntfytest.Hang())
	n := notifier(t, srv.TopicURL("t"), nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := n.Notify(ctx, notify.Message{Text: "x"})
		done <- err
	}()
	srv.WaitPublishes(t, 1)
	cancel()
	if err := <-done; err == nil || err.Error() != "canceled" {
		t.Errorf("err = %v, want canceled", err)
	}
	if c := srv.Count(); c != 1 {
		t.Errorf("%d requests, want 1", c)
	}
}

// TestNeverFollowsRedirects: a redirect would carry the Authorization
// header's token to wherever the Location points (Go keeps it for the
// same host, or a subdomain); it is a failure, and the other server is
// never asked.
func TestNeverFollowsRedirects(t *testing.T) {
	other := ntfytest.New(t)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			redirector := ntfytest.New(t)
			redirector.SetFault(ntfytest.Redirect(code, other.URL))
			// The caller's client would follow; New must make a copy that
			// does not, and leave the caller's alone.
			client := &http.Client{}
			ts := load(t, redirector.TopicURL("t")+" token_file=tok", map[string]string{"tok": testToken})
			n := New(ts[0], client, "")
			retry, err := push(t, n, relaxedTimeout, notify.Message{Text: "hello", ID: "abc"})
			var pe *notify.Error
			if !errors.As(err, &pe) || pe.Class != "redirect" || retry {
				t.Fatalf("err = %#v, retry %v, want a non-retryable redirect", err, retry)
			}
			if want := "HTTP " + strconv.Itoa(code) + " to " + other.URL; pe.Saw != want {
				t.Errorf("Saw = %q, want %q", pe.Saw, want)
			}
			if client.CheckRedirect != nil {
				t.Error("New changed the caller's client")
			}
			if redirector.Count() != 1 {
				t.Errorf("the redirector got %d requests", redirector.Count())
			}
		})
	}
	if c := other.Count(); c != 0 {
		t.Errorf("the redirect target was reached %d times", c)
	}
}

// TestUserAgent: the caller's User-Agent, or lavender's.
func TestUserAgent(t *testing.T) {
	srv := ntfytest.New(t)
	ts := load(t, srv.TopicURL("t"), nil)
	mustPush(t, New(ts[0], nil, ""), notify.Message{Text: "a"})
	mustPush(t, New(ts[0], srv.Client(), "lavender/1.2.3"), notify.Message{Text: "b"})
	ps := srv.Publishes()
	if ps[0].Header.Get("User-Agent") != "lavender" || ps[1].Header.Get("User-Agent") != "lavender/1.2.3" {
		t.Errorf("User-Agents %q, %q", ps[0].Header.Get("User-Agent"), ps[1].Header.Get("User-Agent"))
	}
}

func TestNotifierIdentity(t *testing.T) {
	srv := ntfytest.New(t)
	n := notifier(t, srv.TopicURL("t"), nil)
	if n.Channel() != "ntfy" || n.Name() != "phone.ntfy.env:1" || n.Phone() != n.Name() || n.Identity() == "" {
		t.Errorf("Channel %q Name %q Phone %q Identity %q", n.Channel(), n.Name(), n.Phone(), n.Identity())
	}
}
