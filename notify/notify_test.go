package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
)

func TestRetryableStatus(t *testing.T) {
	for code, want := range map[int]bool{200: false, 400: false, 401: false, 403: false, 404: false, 408: true, 413: false, 429: true, 500: true, 502: true, 503: true} {
		if got := RetryableStatus(code); got != want {
			t.Errorf("RetryableStatus(%d) = %v, want %v", code, got, want)
		}
	}
}

func TestClassify(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	secretURL := "https://ntfy.example/tk_SECRET/alerts"
	tests := []struct {
		name        string
		ctx         context.Context
		err         error
		class       string
		unreachable bool
	}{
		{"deadline", context.Background(), context.DeadlineExceeded, "timeout", false},
		{"canceled", canceled, errors.New("whatever"), "canceled", false},
		{"refused", context.Background(), &url.Error{Op: "Post", URL: secretURL, Err: syscall.ECONNREFUSED}, "connection refused", true},
		{"reset", context.Background(), fmt.Errorf("read: %w", syscall.ECONNRESET), "connection reset", false},
		{"unknown host", context.Background(), &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, "unknown host", true},
		{"tls", context.Background(), errors.New("remote error: tls: bad certificate"), "tls", true},
		{"other", context.Background(), errors.New("odd"), "network error", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.ctx, tc.err, func(s string) string { return strings.ReplaceAll(s, "tk_SECRET", "<secret>") })
			if got.Class != tc.class || got.Unreachable != tc.unreachable || !got.Retryable {
				t.Errorf("got %+v, want class %q unreachable %v, retryable", got, tc.class, tc.unreachable)
			}
			if strings.Contains(got.Detail, "SECRET") || strings.Contains(got.Error(), "SECRET") {
				t.Errorf("detail keeps the secret: %q", got.Detail)
			}
		})
	}
}

func TestRedactHidesTheURL(t *testing.T) {
	err := fmt.Errorf("push: %w", &url.Error{Op: "Get", URL: "https://h/KEY/x", Err: errors.New("boom")})
	if got := Redact(err).Error(); strings.Contains(got, "KEY") || !strings.Contains(got, "<redacted>") {
		t.Errorf("Redact = %q", got)
	}
}

func TestAsError(t *testing.T) {
	if got := AsError(fmt.Errorf("x: %w", &Error{Class: "HTTP 401"})); got.Class != "HTTP 401" || got.Retryable {
		t.Errorf("wrapped Error: %+v", got)
	}
	if got := AsError(errors.New("https://h/KEY")); got.Class != "network error" || !got.Retryable || strings.Contains(got.Detail, "KEY") {
		t.Errorf("other error: %+v", got)
	}
}

// TestRefuseRedirects: a client with it hands back the 3xx and never asks
// the host the Location names.
func TestRefuseRedirects(t *testing.T) {
	asked := false
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { asked = true }))
	defer elsewhere.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusFound)
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer tk_secret")
	resp, err := (&http.Client{CheckRedirect: RefuseRedirects}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || asked {
		t.Errorf("status %d, redirect followed: %v", resp.StatusCode, asked)
	}
}

// TestSecrets: remembered parts are replaced, the longest first so no part
// of a longer secret survives; parts under MinLen are not kept.
func TestSecrets(t *testing.T) {
	k := Secrets{MinLen: 3}
	if got := k.Replace("nothing yet"); got != "nothing yet" {
		t.Errorf("empty Secrets changed %q", got)
	}
	k.Remember([]string{"tk_abc", "Bearer tk_abc", "ab"})
	if got := k.Replace("Authorization: Bearer tk_abc; tk_abc; ab"); got != "Authorization: <redacted>; <redacted>; ab" {
		t.Errorf("Replace = %q", got)
	}
}

// TestScrubHandler: every message, attribute, group name and error the
// logger writes passes the scrub, and invisible format characters go.
func TestScrubHandler(t *testing.T) {
	var buf strings.Builder
	scrub := func(s string) string { return strings.ReplaceAll(s, "SECRET", Redacted) }
	logger := slog.New(NewScrubHandler(slog.NewTextHandler(&buf, nil), scrub))
	logger.With("preset", "a SECRET").WithGroup("g").Warn("msg SECRET", "err", errors.New("e SECRET"),
		"nested", slog.GroupValue(slog.String("k", "SECRET")), "name", "exe.\u202Egnp", "n", 3)
	got := buf.String()
	if strings.Contains(got, "SECRET") || strings.Contains(got, "\u202E") {
		t.Errorf("log holds a secret or a format character: %s", got)
	}
	for _, want := range []string{`msg="msg <redacted>"`, `preset="a <redacted>"`, `g.err="e <redacted>"`, "g.nested.k=<redacted>", "g.name=exe.gnp", "g.n=3"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q: %s", want, got)
		}
	}
}
