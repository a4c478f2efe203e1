package bark

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/barktest"
)

func TestEscapeMessage(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"AZaz09-._~", "AZaz09-._~"},
		{"/", "%2F"},
		{"+", "%2B"},
		{"%", "%25"},
		{"#", "%23"},
		{"?", "%3F"},
		{"&", "%26"},
		{" ", "%20"},
		{"—", "%E2%80%94"},
		{"$0", "%240"},
		{"a\nb", "a%0Ab"},
		{"(16.3/32.0 GB)", "%2816.3%2F32.0%20GB%29"},
	}
	for _, tt := range tests {
		if got := escapeMessage(tt.in); got != tt.want {
			t.Errorf("escapeMessage(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestEncodingOnTheWire checks the raw request line Bark receives and that
// Bark's own routing and unescaping give the message back whole.
func TestEncodingOnTheWire(t *testing.T) {
	srv := barktest.New(t, "KEY")
	tests := []struct {
		name, line, msg, wantURI string
	}{
		{
			name:    "swap message",
			line:    srv.Template("KEY"),
			msg:     "[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening",
			wantURI: "/KEY/%5Blavender-2%5D%20swap%2054%25%20full%20%2816.3%2F32.0%20GB%29%20%E2%80%94%20consider%20intervening?level=passive&isArchive=0",
		},
		{
			name:    "every character Bark would misread",
			line:    srv.Template("KEY"),
			msg:     "a/b+c%d#e?f&g h—i",
			wantURI: "/KEY/a%2Fb%2Bc%25d%23e%3Ff%26g%20h%E2%80%94i?level=passive&isArchive=0",
		},
		{
			name:    "escapes that look decoded already",
			line:    srv.Template("KEY"),
			msg:     "100%25 %zz %2F",
			wantURI: "/KEY/100%2525%20%25zz%20%252F?level=passive&isArchive=0",
		},
		{
			name:    "template's own level, existing query",
			line:    srv.Template("KEY") + "?level=timeSensitive&group=train",
			msg:     "x",
			wantURI: "/KEY/x?level=timeSensitive&group=train&isArchive=0",
		},
		{
			name:    "title segment in the template",
			line:    srv.URL + "/KEY/lavender/$0",
			msg:     "a/b",
			wantURI: "/KEY/lavender/a%2Fb?level=passive&isArchive=0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.Pushes())
			res := sendAll(t, map[string]string{"phone.bark.env": tt.line}, relaxedTimeout, nil, tt.msg)
			if len(res) != 1 || res[0].Err != nil || res[0].Target != "phone.bark.env:1" {
				t.Fatalf("Send = %+v", res)
			}
			got := srv.Pushes()[before:]
			if len(got) != 1 {
				t.Fatalf("server got %d requests", len(got))
			}
			p := got[0]
			if p.RequestURI != tt.wantURI {
				t.Errorf("request URI\n got %s\nwant %s", p.RequestURI, tt.wantURI)
			}
			if p.Body != tt.msg {
				t.Errorf("Bark decoded body %q, want %q (title %q)", p.Body, tt.msg, p.Title)
			}
			if strings.Contains(tt.name, "level") {
				if p.Level != "timeSensitive" || p.IsArchive != "0" {
					t.Errorf("level=%q isArchive=%q", p.Level, p.IsArchive)
				}
			} else if p.Level != "passive" || p.IsArchive != "0" {
				t.Errorf("level=%q isArchive=%q, want passive and 0", p.Level, p.IsArchive)
			}
		})
	}
}

func TestSendFailureClasses(t *testing.T) {
	srv := barktest.New(t, "KEY")
	untrusted := barktest.NewTLS(t, "KEY")

	tests := []struct {
		name      string
		fault     barktest.Fault // how srv answers; nil: success
		line      string
		class     string // "" = accepted
		retryable bool
	}{
		{name: "200", line: srv.Template("KEY")},
		// bark-server's GET / answers a plain "ok": a template that misses
		// the key's path pushes nothing, and must not count as accepted.
		{name: "2xx without JSON", fault: barktest.PlainOK(), line: srv.Template("KEY"), class: "not-bark"},
		{name: "302", fault: barktest.Redirect(http.StatusFound, srv.URL+"/elsewhere"), line: srv.Template("KEY"), class: "redirect"},
		{name: "400", fault: barktest.Status(400, "push failed"), line: srv.Template("KEY"), class: "HTTP 400"},
		{name: "unknown key", line: srv.URL + "/WRONGKEY/$0", class: "HTTP 400"},
		{name: "404", line: srv.URL + "/a/b/c/d/$0", class: "HTTP 404"},
		{name: "429", fault: barktest.Status(429, "too many requests"), line: srv.Template("KEY"), class: "HTTP 429", retryable: true},
		{name: "500", fault: barktest.Status(500, "push failed"), line: srv.Template("KEY"), class: "HTTP 500", retryable: true},
		{name: "200 with code 400", fault: barktest.BarkCode(400, "push failed"), line: srv.Template("KEY"), class: "bark code 400"},
		{name: "200 with code 500", fault: barktest.BarkCode(500, "push failed"), line: srv.Template("KEY"), class: "bark code 500", retryable: true},
		{name: "hang", fault: barktest.Hang(), line: srv.Template("KEY"), class: "timeout", retryable: true},
		{name: "closed port", line: barktest.DownURL(t) + "/KEY/$0", class: "connection refused", retryable: true},
		{name: "closed connection", fault: barktest.CloseConnection(), line: srv.Template("KEY"), class: "connection closed", retryable: true},
		{name: "untrusted certificate", line: untrusted.Template("KEY"), class: "tls", retryable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.SetFault(tt.fault)
			timeout := relaxedTimeout
			if tt.name == "hang" {
				timeout = hangTimeout
			}
			res := sendAll(t, map[string]string{"phone.bark.env": tt.line}, timeout, nil, "hello")
			if len(res) != 1 {
				t.Fatalf("results = %+v", res)
			}
			r := res[0]
			class := ""
			if r.Err != nil {
				class = r.Err.Error()
			}
			if class != tt.class || r.Retryable != tt.retryable {
				t.Errorf("got class %q retryable %v, want %q %v", class, r.Retryable, tt.class, tt.retryable)
			}
			if r.Target != "phone.bark.env:1" {
				t.Errorf("result names %q, want phone.bark.env:1", r.Target)
			}
			var pe *PushError
			if tt.class != "" && (!errors.As(r.Err, &pe) || strings.Contains(pe.Detail+pe.Saw, "/KEY/")) {
				t.Errorf("failure %#v: not a PushError, or its detail holds the key", r.Err)
			}
		})
	}
}

// TestPushNeverFollowsRedirects: the device key is in the URL, so a push
// that followed a redirect would hand it to whatever host the Location
// names, with the first URL as its Referer.
func TestPushNeverFollowsRedirects(t *testing.T) {
	other := barktest.New(t, "REDIRECTKEY1") // where the redirects point
	srv := barktest.New(t, "REDIRECTKEY1")
	var redirectors []*barktest.Server
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			redirector := barktest.New(t, "REDIRECTKEY1")
			redirector.SetFault(barktest.Redirect(code, other.URL))
			redirectors = append(redirectors, redirector)
			res := sendAll(t, map[string]string{"phone.bark.env": redirector.Template("REDIRECTKEY1") + "\n" + srv.Template("REDIRECTKEY1")}, relaxedTimeout, nil, "hello")
			if len(res) != 2 || res[0].Err == nil || res[0].Err.Error() != "redirect" || res[0].Retryable {
				t.Fatalf("results = %+v, want the first a non-retryable redirect failure", res)
			}
			if res[1].Err != nil {
				t.Errorf("the second target failed: %v", res[1].Err)
			}
			if redirector.Count() != 1 {
				t.Errorf("the redirector got %d pushes, want 1", redirector.Count())
			}
			var pe *PushError
			if !errors.As(res[0].Err, &pe) || strings.Contains(pe.Detail+pe.Saw+res[0].Err.Error(), "REDIRECTKEY1") {
				t.Errorf("the failure holds the key: %#v", res[0].Err)
			}
		})
	}
	if n := other.Count(); n != 0 {
		t.Errorf("the redirect target was reached %d times", n)
	}
	for _, s := range append(redirectors, srv) {
		for _, p := range s.Pushes() {
			if p.Referer != "" {
				t.Errorf("a push carried Referer %q", p.Referer)
			}
		}
	}
}

// TestEmojiArriveWhole: the joiners, skin tones and flag tags that make one
// emoji out of several code points reach Bark untouched, in clear and
// encrypted, while a bidi override is still dropped.
func TestEmojiArriveWhole(t *testing.T) {
	const (
		family   = "\U0001F468\u200D\U0001F469\u200D\U0001F467"
		coder    = "\U0001F469\U0001F3FD\u200D\U0001F4BB"
		scotland = "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F"
		key      = "0123456789abcdef"
	)
	msg := "run done " + family + " " + coder + " " + scotland + " \u2764\uFE0F"
	srv := barktest.New(t, "KEY", "ENC")
	res := sendAll(t, map[string]string{"phone.bark.env": srv.Template("KEY") + "\n" + EncryptionKey + "=aes-128-cbc:" + key + "\n" + srv.Template("ENC")},
		relaxedTimeout, nil, msg+"\u202E")
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%+v", r)
		}
	}
	for _, p := range srv.Pushes() {
		got := p.Body
		if p.Encrypted() {
			got = barktest.AppDecrypt(t, "cbc", key, p.IV, p.Ciphertext)["body"]
		}
		if got != msg {
			t.Errorf("Bark got %q (%+q), want %q", got, got, msg)
		}
	}
}
