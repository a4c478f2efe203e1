package ntfy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/notify"
)

// TestRealServer pushes to a real ntfy server, built from its source,
// when LAVENDER_NTFY_SERVER names its binary; it is skipped otherwise.
// ntfy builds without its web app or docs, empty placeholders standing in
// for them (cgo for SQLite, no build tags needed):
//
//	git clone https://github.com/binwiederhier/ntfy && cd ntfy
//	mkdir -p server/docs server/site && touch server/docs/index.html server/site/app.html
//	go build -o "$HOME/bin/ntfy" .
//	LAVENDER_NTFY_SERVER="$HOME/bin/ntfy" go test -run TestRealServer ./ntfy
//
// It checks what ntfytest can only copy: that ntfy reads back the title,
// body, priority, tags and click as sent, accepts the token in the header,
// refuses a wrong one with 401, and keeps a 4095-byte body a message.
func TestRealServer(t *testing.T) {
	bin := os.Getenv("LAVENDER_NTFY_SERVER")
	if bin == "" {
		t.Skip("LAVENDER_NTFY_SERVER is not set (the path of an ntfy binary; see docs/ntfy.md)")
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "server.yml")
	if err := os.WriteFile(config, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	env := append(os.Environ(), "NTFY_AUTH_FILE="+filepath.Join(dir, "user.db"), "NTFY_PASSWORD=pw-for-phil")
	ctx, cancel := context.WithCancel(t.Context())
	srv := exec.CommandContext(ctx, bin, "serve", "--config", config, "--listen-http", addr,
		"--auth-file", filepath.Join(dir, "user.db"), "--auth-default-access", "deny-all",
		"--cache-file", filepath.Join(dir, "cache.db"))
	srv.Env = env
	var logs strings.Builder
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.Wait() })
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/v1/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ntfy did not start: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cli := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ntfy %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cli("user", "add", "phil")
	cli("access", "phil", "alerts", "rw")
	token := regexp.MustCompile(`tk_[a-z0-9]{29}`).FindString(cli("token", "add", "phil"))
	if token == "" {
		t.Fatal("ntfy token add printed no token")
	}
	cdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(cdir, "tok"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cdir, "bad"), []byte("tk_0000000000000000000000000000x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	targets, err := parseTargets(cdir, "real.ntfy.env", []byte(base+"/alerts token_file=tok\n"+base+"/alerts token_file=bad"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NTFY_PASSWORD", "pw-for-phil")
	basicTargets, err := parseTargets(cdir, "real.ntfy.env", []byte(base+"/alerts user=phil password_env=NTFY_PASSWORD"))
	if err != nil {
		t.Fatal(err)
	}
	n, wrong, basic := New(targets[0], nil, ""), New(targets[1], nil, ""), New(basicTargets[0], nil, "")

	const family = "\U0001F468\u200D\U0001F469\u200D\U0001F467"
	sent := notify.Message{Text: "swap 54% " + family, Title: "Überhitzt " + family, ID: "0123abcd", Level: notify.LevelCritical,
		Tags: []string{"warning", "gpu"}, URL: "https://grafana.example/d/x"}
	mustPush(t, n, sent)
	mustPush(t, basic, notify.Message{Text: "by basic auth"})
	mustPush(t, n, notify.Message{Text: strings.Repeat("a", MaxMessageBytes+10)})
	if _, err := push(t, wrong, relaxedTimeout, notifyText("x")); err == nil || err.Error() != "HTTP 401" {
		t.Errorf("a wrong token: %v, want HTTP 401", err)
	}
	if r, ok := n.LastReply(); !ok || r.ID == "" || r.Time == 0 {
		t.Errorf("LastReply = %+v %v", r, ok)
	}
	t.Logf("sequence support of this server: %s", n.SequenceSupport())
	// A delete from a notifier that has pushed nothing asks the server; a
	// server before 2.16 answers its own 404, which means no sequence ids.
	fresh := New(targets[0], nil, "")
	if _, err := push(t, fresh, relaxedTimeout, notify.Message{ID: "0123abcd", Delete: true}); err != nil {
		t.Errorf("delete: %v (%#v)", err, err)
	}
	if support := fresh.SequenceSupport(); support != n.SequenceSupport() {
		t.Errorf("after a delete, sequence support %q; the pushes said %q", support, n.SequenceSupport())
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/alerts/json?poll=1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["event"] == "message" {
			got = append(got, m)
		}
	}
	if len(got) != 3 {
		t.Fatalf("ntfy kept %d messages, want 3: %v", len(got), got)
	}
	m := got[0]
	tags := fmt.Sprint(m["tags"])
	if m["title"] != sent.Title || m["message"] != sent.Text || m["priority"] != 5.0 || m["click"] != sent.URL || tags != "[warning gpu]" {
		t.Errorf("ntfy kept %v", m)
	}
	if got[1]["message"] != "by basic auth" {
		t.Errorf("basic auth push: %v", got[1])
	}
	if long := got[2]; long["attachment"] != nil || len(long["message"].(string)) != MaxMessageBytes {
		t.Errorf("the clipped body: attachment %v, %d bytes", long["attachment"], len(fmt.Sprint(long["message"])))
	}
	if slices.ContainsFunc(strings.Split(logs.String(), "\n"), func(l string) bool { return strings.Contains(l, token) }) {
		t.Error("ntfy's own log holds the token: it was sent in a URL")
	}
}

// freeLoopbackAddr is a loopback address free a moment ago, for a server
// that needs its port on its command line.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
