// Package heartbeat is the training side of the heartbeat API: the client
// that posts heartbeats, starts runs and reads phases, and the `lavender
// phase run` wrapper that runs a command as a phase (start, pings, end by
// exit code, signals forwarded, terminal handed over). It speaks the wire
// format of package phaseapi and imports nothing else of lavender's, so it
// never pulls in the phase server.
package heartbeat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/phaseapi"
)

// maxAnswerBytes bounds the read of an answer: 64 phases are some 30 KiB.
const maxAnswerBytes = 1 << 20

// Client talks to the heartbeat API.
type Client struct {
	base     *url.URL
	http     *http.Client
	username string
	password string
}

// String, GoString, Format and LogValue print the base URL only: the
// client holds the basic-auth password.
func (c *Client) String() string { return c.base.String() }

// GoString implements fmt.GoStringer.
func (c *Client) GoString() string { return "heartbeat.Client(" + c.String() + ")" }

// Format implements fmt.Formatter, so that no verb reaches the fields.
func (c *Client) Format(f fmt.State, verb rune) { textsafe.FormatAs(f, verb, c.String(), c.GoString()) }

// LogValue implements slog.LogValuer.
func (c *Client) LogValue() slog.Value { return slog.StringValue(c.String()) }

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithBasicAuth sends HTTP basic-auth credentials with every request, for an
// exporter behind a --web.config.file with basic_auth_users.
func WithBasicAuth(username, password string) ClientOption {
	return func(c *Client) { c.username, c.password = username, password }
}

// WithHTTPClient replaces the default client (DefaultTimeout).
func WithHTTPClient(h *http.Client) ClientOption {
	return func(c *Client) { c.http = h }
}

// DefaultURL is the exporter on this host, on the default port.
const DefaultURL = "http://127.0.0.1:" + phaseapi.DefaultPort

// DefaultTimeout bounds each request of a client built without
// WithHTTPClient.
const DefaultTimeout = 10 * time.Second

// NewClient returns a client for the exporter at baseURL, e.g. DefaultURL
// (a path prefix such as a reverse proxy's is kept).
func NewClient(baseURL string, opts ...ClientOption) (*Client, error) {
	u, err := ParseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{base: u, http: &http.Client{Timeout: DefaultTimeout}}
	for _, o := range opts {
		o(c)
	}
	// Requests may carry the basic-auth password, which Go forwards on a
	// redirect to the same host (another port, or http instead of https):
	// the API never redirects, so a 3xx is answered as the error it is.
	hc := *c.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &hc
	return c, nil
}

// ParseBaseURL reads the exporter's base URL as a user types it, the way
// the Python client reads LAVENDER_URL, so that one value works for both:
// "host:port" without a scheme is http, trailing slashes and a pasted
// heartbeat path are dropped. Credentials, a query or a fragment are
// refused, and no error quotes a password.
func ParseBaseURL(raw string) (*url.URL, error) {
	text := strings.TrimSpace(raw)
	if text == "" {
		return nil, errors.New("exporter URL is empty: want http://host:port")
	}
	if !strings.Contains(text, "://") {
		text = "http://" + text
	}
	u, err := url.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("exporter URL %q: want http://host:port or https://host:port", redactURL(text))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("exporter URL %q: the scheme must be http or https", u.Redacted())
	case u.User != nil:
		return nil, errors.New("exporter URL carries credentials; use the username and password-file flags instead")
	case u.Hostname() == "":
		return nil, fmt.Errorf("exporter URL %q: no host", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("exporter URL %q: a base URL has no query or fragment", redactURL(text))
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("exporter URL %q: bad port", u.Redacted())
		}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if strings.HasSuffix(u.Path, phaseapi.HeartbeatPath) {
		u.Path = strings.TrimRight(strings.TrimSuffix(u.Path, phaseapi.HeartbeatPath), "/")
	}
	u.RawPath = ""
	return u, nil
}

// redactURL is text with what could be a password (userinfo) or a token
// (the query and fragment) cut, for an error about a URL that did not
// parse or is refused for them.
func redactURL(text string) string {
	if i := strings.IndexAny(text, "?#"); i >= 0 {
		text = text[:i] + "?…"
	}
	if i := strings.Index(text, "://"); i >= 0 {
		rest := text[i+3:]
		authority, _, _ := strings.Cut(rest, "/")
		if at := strings.LastIndex(authority, "@"); at >= 0 {
			text = text[:i+3] + "…@" + rest[at+1:]
		}
	}
	return text
}

// BaseURL is the exporter's base URL, without a trailing slash, as
// `lavender phase run` gives it to its command in LAVENDER_URL. It never
// carries credentials: NewClient refuses a URL with them.
func (c *Client) BaseURL() string { return strings.TrimRight(c.base.String(), "/") }

// APIError is an error answer from the API.
type APIError struct {
	StatusCode int
	Message    string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("exporter answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Heartbeat posts one event and returns the exporter's answer: the phase as
// it now sees it, and a warning when it took the event without a part of it.
func (c *Client) Heartbeat(ctx context.Context, req phaseapi.HeartbeatRequest) (phaseapi.HeartbeatResponse, error) {
	var resp phaseapi.HeartbeatResponse
	err := c.post(ctx, phaseapi.HeartbeatPath, req, &resp)
	return resp, err
}

// StartRun asks the exporter to start a new run and returns it.
func (c *Client) StartRun(ctx context.Context, header string) (phaseapi.Run, error) {
	var resp phaseapi.RunResponse
	err := c.post(ctx, phaseapi.RunsPath, phaseapi.RunRequest{Header: header}, &resp)
	return resp.Run, err
}

// Phases returns the exporter's current run and phases.
func (c *Client) Phases(ctx context.Context) (phaseapi.PhasesResponse, error) {
	var resp phaseapi.PhasesResponse
	err := c.do(ctx, http.MethodGet, phaseapi.PhasesPath, nil, &resp)
	return resp, err
}

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, path, body, out)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	u := c.base.JoinPath(path)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.username != "" || c.password != "" {
		req.SetBasicAuth(c.username, c.password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// url.Error would repeat the method and URL: "Post \"http://…\": dial …".
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, u.Redacted(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e phaseapi.ErrorResponse
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
			if len(e.Error) > 200 {
				e.Error = e.Error[:200] + "…"
			}
		}
		return &APIError{StatusCode: resp.StatusCode, Message: e.Error}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, u.Redacted(), err)
		}
	}
	return nil
}

// WorkDirs is what a start reports of the directories the phase writes to:
// the working directory, where a script's relative paths (checkpoints/,
// outputs/) land. It is empty when the directory cannot be named (deleted
// under the process): a start is never refused for want of it.
func WorkDirs() []string {
	wd, err := os.Getwd()
	if err != nil || !filepath.IsAbs(wd) {
		return nil
	}
	return []string{wd}
}
