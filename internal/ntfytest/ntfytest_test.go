package ntfytest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// do sends one request to s and returns the status and decoded JSON.
func do(t *testing.T, s *Server, method, path, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

func TestPublishAnswersAsNtfy(t *testing.T) {
	s := New(t)
	s.SetNow(func() time.Time { return time.Unix(1000, 0) })
	status, m := do(t, s, http.MethodPost, "/alerts", "  hello  \n", map[string]string{
		"X-Title":       "=?UTF-8?b?w5xiZXI=?=",
		"X-Priority":    "high",
		"X-Tags":        "warning, gpu ,,",
		"X-Click":       "https://example.com/x",
		"X-Sequence-ID": "seq-1",
		"Authorization": "Bearer tk_x",
	})
	if status != 200 || m["id"] != "msg000000001" || m["event"] != "message" || m["topic"] != "alerts" || m["title"] != "Über" ||
		m["message"] != "hello" || m["priority"] != 4.0 || m["click"] != "https://example.com/x" || m["sequence_id"] != "seq-1" ||
		m["time"] != 1000.0 || m["expires"] != 1000.0+12*3600 {
		t.Errorf("answer %d %v", status, m)
	}
	p := s.Publishes()[0]
	if p.Title != "Über" || p.RawTitle != "=?UTF-8?b?w5xiZXI=?=" || strings.Join(p.Tags, "|") != "warning|gpu" || p.Priority != 4 ||
		p.Auth != "bearer" || p.Token != "tk_x" || p.SequenceID != "seq-1" || p.ID != "msg000000001" || p.Status != 200 {
		t.Errorf("recorded %+v", p)
	}
}

func TestVersions(t *testing.T) {
	s := New(t)
	if status, m := do(t, s, http.MethodPost, "/t/seq-2", "x", nil); status != 200 || m["sequence_id"] != "seq-2" {
		t.Errorf("2.16 publish to /t/seq: %d %v", status, m)
	}
	if status, m := do(t, s, http.MethodDelete, "/t/seq-2", "", nil); status != 200 || m["event"] != "message_delete" || m["sequence_id"] != "seq-2" {
		t.Errorf("2.16 delete: %d %v", status, m)
	}
	if status, m := do(t, s, http.MethodPost, "/t", "x", map[string]string{"X-Sequence-ID": "bad/id"}); status != 400 || m["code"] != 40049.0 {
		t.Errorf("2.16 bad sequence id: %d %v", status, m)
	}
	s.SetVersion(V213)
	if status, m := do(t, s, http.MethodPost, "/t", "x", map[string]string{"X-Sequence-ID": "seq-3"}); status != 200 || m["sequence_id"] != nil {
		t.Errorf("2.13 publish with X-Sequence-ID: %d %v", status, m)
	}
	if p := s.Publishes()[3]; p.SentSequenceID != "seq-3" || p.SequenceID != "" {
		t.Errorf("2.13 recorded %q kept %q", p.SentSequenceID, p.SequenceID)
	}
	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		if status, m := do(t, s, method, "/t/seq-3", "", nil); status != 404 || m["code"] != 40401.0 || m["http"] != 404.0 {
			t.Errorf("2.13 %s /t/seq: %d %v", method, status, m)
		}
	}
}

func TestAuth(t *testing.T) {
	s := New(t)
	s.RequireToken("tk_good")
	for _, tt := range []struct {
		auth   string
		status int
	}{
		{"", 403}, {"Bearer tk_bad", 401}, {"Bearer tk_good", 200}, {"Basic OnRrX2dvb2Q=", 200}, // ":tk_good"
	} {
		if status, _ := do(t, s, http.MethodPost, "/t", "x", map[string]string{"Authorization": tt.auth}); status != tt.status {
			t.Errorf("token, auth %q: %d, want %d", tt.auth, status, tt.status)
		}
	}
	s.RequireBasic("phil", "pw")
	if status, _ := do(t, s, http.MethodPost, "/t", "x", map[string]string{"Authorization": "Basic cGhpbDpwdw=="}); status != 200 {
		t.Errorf("basic: %d", status)
	}
	if p := s.Publishes()[4]; p.Auth != "basic" || p.User != "phil" || p.Password != "pw" {
		t.Errorf("recorded %+v", p)
	}
}

func TestBodies(t *testing.T) {
	s := New(t)
	for _, tt := range []struct {
		body       string
		message    string
		attachment bool
	}{
		{"", "triggered", false},
		{strings.Repeat("a", MessageSizeLimit-1), strings.Repeat("a", MessageSizeLimit-1), false},
		{strings.Repeat("a", MessageSizeLimit), "You received a file: attachment.txt", true},
		{"\xff", "You received a file: attachment.txt", true},
	} {
		status, m := do(t, s, http.MethodPut, "/t", tt.body, nil)
		if status != 200 || m["message"] != tt.message || (m["attachment"] != nil) != tt.attachment {
			t.Errorf("body of %d bytes: %d, message %.20q, attachment %v", len(tt.body), status, m["message"], m["attachment"])
		}
	}
	if status, m := do(t, s, http.MethodPost, "/t", "x", map[string]string{"X-Priority": "loud"}); status != 400 || m["code"] != 40007.0 {
		t.Errorf("bad priority: %d %v", status, m)
	}
	if status, _ := do(t, s, http.MethodGet, "/", "", nil); status != 200 {
		t.Errorf("web app: %d", status)
	}
}

func TestFaults(t *testing.T) {
	s := New(t)
	for _, tt := range []struct {
		fault  Fault
		status int
		code   any
	}{
		{Error(42908), 429, 42908.0},
		{Error(40101), 401, 40101.0},
		{Error(50301), 503, 50301.0},
		{ErrorText(41301, "too big"), 413, 41301.0},
		{WebApp(), 200, nil},
		{Redirect(308, "http://127.0.0.1:1"), 308, nil},
		{FailFirst(1, Error(50001)), 500, 50001.0},
	} {
		s.SetFault(tt.fault)
		if status, m := do(t, s, http.MethodPost, "/t", "x", nil); status != tt.status || m["code"] != tt.code {
			t.Errorf("%d %v, want %d %v", status, m, tt.status, tt.code)
		}
	}
	if status, _ := do(t, s, http.MethodPost, "/t", "x", nil); status != 200 {
		t.Errorf("FailFirst's second: %d", status)
	}
	s.SetFault(EchoRequest(40101))
	if _, m := do(t, s, http.MethodPost, "/t", "x", map[string]string{"Authorization": "Bearer tk_echo"}); !strings.Contains(m["error"].(string), "Bearer tk_echo") {
		t.Errorf("EchoRequest: %v", m)
	}
	if p := s.Publishes()[0]; p.Status != 429 || p.Code != 42908 {
		t.Errorf("recorded %d %d", p.Status, p.Code)
	}
}
