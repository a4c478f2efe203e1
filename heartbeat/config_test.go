package heartbeat

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lavender-ml/lavender/phaseapi"
)

// TestClientConfigOpenErrors: each bad setting is refused before any
// request, naming its flag.
func TestClientConfigOpenErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  ClientConfig
		want string
	}{
		{"missing CA file", ClientConfig{URL: DefaultURL, CAFile: filepath.Join(dir, "nope.pem")}, "--tls.ca-file: open "},
		{"CA file without a certificate", ClientConfig{URL: DefaultURL, CAFile: notPEM}, "--tls.ca-file " + notPEM + ": no PEM certificate in it"},
		{"password without user", ClientConfig{URL: DefaultURL, PasswordFile: notPEM}, "--password-file needs --username"},
		{"missing password file", ClientConfig{URL: DefaultURL, Username: "u", PasswordFile: filepath.Join(dir, "nope")}, "password file: open "},
		{"credentials in the URL", ClientConfig{URL: "http://u:secret@127.0.0.1:9877"}, "--url: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.Open()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Open() error %v, want it to start %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error repeats the password: %v", err)
			}
		})
	}
}

// TestClientConfigEvent: the password comes from its file without the
// newline, a start carries the working directory, a ping does not, a
// total of 0 never reaches the server, and the warning of an answer comes
// back to the command.
func TestClientConfigEvent(t *testing.T) {
	var (
		mu   sync.Mutex
		got  []phaseapi.HeartbeatRequest
		auth []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req phaseapi.HeartbeatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		user, pass, _ := r.BasicAuth()
		mu.Lock()
		got, auth = append(got, req), append(auth, user+":"+pass)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		resp := phaseapi.HeartbeatResponse{Phase: phaseapi.Phase{Name: req.Phase}}
		if req.Event == phaseapi.EventEnd {
			resp.Warning = "end recorded without its step and total (bad progress: step 9 is past the total of 5)"
		}
		json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	passwordFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(passwordFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ClientConfig{URL: srv.URL, Username: "trainer", PasswordFile: passwordFile, Timeout: DefaultTimeout}.Open()
	if err != nil {
		t.Fatal(err)
	}
	zero, five := uint64(0), uint64(5)
	if warning, err := c.Event(t.Context(), phaseapi.HeartbeatRequest{Phase: "SFT", Event: phaseapi.EventStart, Total: &five}); err != nil || warning != "" {
		t.Fatalf("start: %q %v", warning, err)
	}
	if _, err := c.Event(t.Context(), phaseapi.HeartbeatRequest{Phase: "SFT", Event: phaseapi.EventPing}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Event(t.Context(), phaseapi.HeartbeatRequest{Phase: "SFT", Event: phaseapi.EventPing, Total: &zero}); err == nil || err.Error() != "--total must be 1 or more" {
		t.Errorf("total 0: %v", err)
	}
	nine := uint64(9)
	if warning, err := c.Event(t.Context(), phaseapi.HeartbeatRequest{Phase: "SFT", Event: phaseapi.EventEnd, Step: &nine, Total: &five}); err != nil || !strings.Contains(warning, "step 9 is past the total of 5") {
		t.Errorf("end: warning %q, err %v; want the answer's warning", warning, err)
	}
	wd, _ := os.Getwd()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("server got %d heartbeats, want 3 (the total of 0 never sent)", len(got))
	}
	if len(got[0].Dirs) != 1 || got[0].Dirs[0] != wd || got[0].Total == nil || *got[0].Total != 5 {
		t.Errorf("start %+v, want dirs [%s] and total 5", got[0], wd)
	}
	if len(got[1].Dirs) != 0 {
		t.Errorf("a ping carried dirs %v", got[1].Dirs)
	}
	for _, a := range auth {
		if a != "trainer:s3cret" {
			t.Errorf("basic auth %q, want trainer:s3cret (the file's newline dropped)", a)
		}
	}
}
