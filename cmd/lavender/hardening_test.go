package main

// Hardening tests (issue 8): Bark faults, bad request bodies, a logs dir
// that fails, authentication, and the bark.env permission warning, all
// against the real commands on loopback. The slow ones (load, kill -9,
// slowloris) are in load_test.go behind LAVENDER_SLOW=1; the secrets sweep
// is in secrets_test.go.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"lavender/runlog"
)

// hProc is a serving command (serve, exporter or bridge) run in-process
// with its log at debug level, as `--log.level=debug` would give it.
type hProc struct {
	t      *testing.T
	base   string // http(s)://127.0.0.1:port
	client *http.Client
	logs   *lockedBuffer
	stop   func() error
}

// hStart runs args (the command name first) on 127.0.0.1:0 until the test
// ends. client talks to it; nil means a plain client with a 30 s timeout.
func hStart(t *testing.T, client *http.Client, args ...string) *hProc {
	t.Helper()
	p := &hProc{t: t, client: client, logs: &lockedBuffer{}}
	if p.client == nil {
		p.client = &http.Client{Timeout: 30 * time.Second}
	}
	cli := parseCLI(t, append(args, "--web.listen-address=127.0.0.1:0")...)
	logger, err := newLogger("debug", "logfmt", p.logs)
	if err != nil {
		t.Fatal(err)
	}
	g := &Globals{Logger: logger, Stdout: p.logs, Stderr: p.logs}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan []net.Addr, 1)
	ready := make(chan struct{})
	done := make(chan error, 1)
	onListen := func(a []net.Addr) { addrs <- a }
	go func() {
		switch args[0] {
		case "serve":
			done <- cli.Serve.serve(ctx, g, onListen, func() { close(ready) })
		case "exporter":
			close(ready)
			done <- cli.Exporter.serve(ctx, g, onListen)
		case "bridge":
			close(ready)
			done <- cli.Bridge.serve(ctx, g, onListen)
		default:
			done <- fmt.Errorf("hStart: no command %q", args[0])
		}
	}()
	scheme := "http"
	if client != nil && client.Transport != nil {
		scheme = "https"
	}
	select {
	case a := <-addrs:
		p.base = scheme + "://" + a[0].String()
	case err := <-done:
		cancel()
		t.Fatalf("%s stopped before listening: %v\n%s", args[0], err, p.logs)
	}
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("%s stopped before ready: %v\n%s", args[0], err, p.logs)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("%s not ready within 30s", args[0])
	}
	var once sync.Once
	var stopErr error
	p.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = errors.New("did not stop within 30s")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("%s: %v", args[0], err)
		}
	})
	return p
}

// do sends one request; user "" sends no credentials.
func (p *hProc) do(method, path string, body []byte, user, pass string) (int, string) {
	p.t.Helper()
	code, answer, err := p.try(method, path, body, user, pass)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, answer
}

func (p *hProc) try(method, path string, body []byte, user, pass string) (int, string, error) {
	req, err := http.NewRequest(method, p.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), err
}

// metrics scrapes /metrics (no credentials).
func (p *hProc) metrics() string {
	p.t.Helper()
	code, body := p.do("GET", "/metrics", nil, "", "")
	if code != 200 {
		p.t.Fatalf("/metrics answered %d", code)
	}
	return body
}

// sample returns the value of one series written exactly as promhttp
// prints it (labels sorted), e.g. `x_total{code="200"}`; -1 if absent.
func sample(exposition, series string) float64 {
	for _, line := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// hSwapWebhook is Alertmanager's payload for the swap alert. Each i is a
// different alert (fingerprint and start), so the bridge's dedup lets
// every one through to Bark.
func hSwapWebhook(i int) []byte {
	return fmt.Appendf(nil, `{"version":"4","status":"firing","receiver":"bark","groupKey":"{}:{alertname=\"SwapUsageHigh\"}",`+
		`"alerts":[{"status":"firing","labels":{"alertname":"SwapUsageHigh","instance":"box:9877"},`+
		`"annotations":{"swap_used_ratio":"0.54","swap_used_bytes":"17501991731","swap_total_bytes":"3.4359738368e+10"},`+
		`"startsAt":"2026-04-24T00:45:%02d.%06dZ","fingerprint":"%016x"}]}`, i%60, i, i+1)
}

// hProcfs is a fake procfs with swap 10 % full, so no watchdog pushes.
func hProcfs(t *testing.T) string { return fakeProcfsAt(t, 0.10) }

// hServeArgs are serve's flags for a test: fake procfs, no watchdog, the
// given Bark config and logs dirs.
func hServeArgs(t *testing.T, barkDir, logDir string, extra ...string) []string {
	return append([]string{"serve", "--path.procfs=" + hProcfs(t), "--watchdog.interval=0",
		"--runlog.dir=" + logDir, "--bark.config-dir=" + barkDir}, extra...)
}

// hRunLog reads the current run log and checks it parses within the cap.
func hRunLog(t *testing.T, dir string) string {
	t.Helper()
	path, err := runlog.CurrentPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > runlog.DefaultMaxBytes {
		t.Errorf("run log is %d bytes, over the cap", len(data))
	}
	if _, err := runlog.Parse(data); err != nil {
		t.Errorf("run log does not parse: %v\n%s", err, data)
	}
	return string(data)
}

// TestBodyLimitsEveryPOST: every endpoint that takes a POST refuses a body
// over its limit with 413, whether the length is declared or chunked, and
// nothing of it is acted on.
func TestBodyLimitsEveryPOST(t *testing.T) {
	bark := newFakeBark(t)
	barkDir := barkConfigDir(t, map[string]string{"phone.bark.env": bark.URL + "/KEY/$0\n"})
	logDir := t.TempDir()
	p := hStart(t, nil, hServeArgs(t, barkDir, logDir)...)
	runBefore, _ := runlog.CurrentPath(logDir)

	for _, tc := range []struct {
		path  string
		limit int
		ok    []byte // a valid body
		okish int
	}{
		{"/webhook", 1 << 20, hSwapWebhook(1), 200},
		{"/api/v1/heartbeat", 64 << 10, []byte(`{"phase":"Train","event":"start"}`), 200},
		{"/api/v1/runs", 64 << 10, nil, 0}, // not sent: it would start a run
		{"/-/reload", 64 << 10, nil, 200},
	} {
		// Valid JSON padded with spaces, so only the size is wrong.
		over := append(bytes.Repeat([]byte(" "), tc.limit+1-len(`{}`)), `{}`...)
		for _, chunked := range []bool{false, true} {
			req, _ := http.NewRequest("POST", p.base+tc.path, bytes.NewReader(over))
			req.Header.Set("Content-Type", "application/json")
			if chunked {
				req.ContentLength = -1
				req.Body = io.NopCloser(bytes.NewReader(over))
			}
			resp, err := p.client.Do(req)
			if err != nil {
				t.Fatalf("POST %s (%d bytes, chunked %v): %v", tc.path, len(over), chunked, err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("POST %s with %d bytes (chunked %v): %d %q, want 413", tc.path, len(over), chunked, resp.StatusCode, msg)
			}
		}
		if tc.okish != 0 {
			if code, body := p.do("POST", tc.path, tc.ok, "", ""); code != tc.okish {
				t.Errorf("POST %s with a good body after the big ones: %d %q", tc.path, code, body)
			}
		}
	}
	if runAfter, _ := runlog.CurrentPath(logDir); runAfter != runBefore {
		t.Errorf("an oversized POST /api/v1/runs started run %s", runAfter)
	}
	if n := len(bark.requests()); n != 1 {
		t.Errorf("Bark got %d pushes, want 1 (the good webhook only)", n)
	}
	m := p.metrics()
	if v := sample(m, `lavender_webhook_requests_total{code="413"}`); v != 2 {
		t.Errorf("webhook 413s counted: %v, want 2", v)
	}
}

// hBark is a Bark stand-in that fails in one chosen way.
type hBark struct {
	url     string        // the template's base, http(s)://host:port
	arrived chan struct{} // gets a value when a push reaches it
}

func hFaultyBark(t *testing.T, fault string) *hBark {
	t.Helper()
	b := &hBark{arrived: make(chan struct{}, 1000)}
	note := func() {
		select {
		case b.arrived <- struct{}{}:
		default:
		}
	}
	release := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		note()
		switch fault {
		case "hang":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "500", "400":
			code, _ := strconv.Atoi(fault)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			// bark-server's messages can quote the path, key included.
			json.NewEncoder(w).Encode(map[string]any{"code": code, "message": "push failed: " + r.URL.Path, "timestamp": 1})
		default:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"code": 200, "message": "success", "timestamp": 1})
		}
	})
	switch fault {
	case "down":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b.url = "http://" + l.Addr().String()
		l.Close()
	case "reset":
		b.url = "http://" + hResetter(t, note)
	case "tls":
		srv := httptest.NewUnstartedServer(handler)
		// The handshake errors it logs are the point of the test, not news.
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		b.url = srv.URL
	default:
		srv := httptest.NewServer(handler)
		t.Cleanup(func() {
			close(release)
			srv.Close()
		})
		b.url = srv.URL
	}
	return b
}

// hResetter accepts connections, reads the request and closes with
// SO_LINGER 0, so the client gets a TCP RST instead of an answer.
func hResetter(t *testing.T, note func()) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				buf := make([]byte, 0, 4096)
				tmp := make([]byte, 4096)
				for !bytes.Contains(buf, []byte("\r\n\r\n")) {
					n, err := c.Read(tmp)
					buf = append(buf, tmp[:n]...)
					if err != nil {
						break
					}
				}
				note()
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}()
		}
	}()
	return l.Addr().String()
}

// TestBarkFaults: for each way Bark can fail, the webhook answers as
// Alertmanager's retry logic needs (503: retry; 200: a 4xx that will not
// pass), within --bark.timeout plus the margin, with the failure counted
// and recorded; and while a push hangs, scrapes and heartbeats answer.
func TestBarkFaults(t *testing.T) {
	const barkTimeout = 2 * time.Second
	for _, tc := range []struct {
		fault, class string
		code         int
	}{
		{"down", "connection refused", 503},
		{"hang", "timeout", 503},
		{"500", "HTTP 500", 503},
		{"400", "HTTP 400", 200},
		{"reset", "connection reset", 503},
		{"tls", "tls", 503},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			bark := hFaultyBark(t, tc.fault)
			barkDir := barkConfigDir(t, map[string]string{"phone.bark.env": bark.url + "/KEY/$0\n"})
			logDir := t.TempDir()
			p := hStart(t, nil, hServeArgs(t, barkDir, logDir, "--bark.timeout="+barkTimeout.String())...)

			type answer struct {
				code    int
				body    string
				elapsed time.Duration
				err     error
			}
			done := make(chan answer, 1)
			start := time.Now()
			go func() {
				code, body, err := p.try("POST", "/webhook", hSwapWebhook(7), "", "")
				done <- answer{code, body, time.Since(start), err}
			}()

			if tc.fault == "hang" {
				select {
				case <-bark.arrived:
				case <-time.After(30 * time.Second):
					t.Fatal("the push never reached the hanging Bark")
				}
				// The push hangs now: everything else must answer before it
				// ends. This is an order, not a timing: the webhook cannot
				// answer before the Bark timeout has passed.
				for _, r := range []struct{ method, path, body string }{
					{"GET", "/metrics", ""},
					{"POST", "/api/v1/heartbeat", `{"phase":"Train","event":"start"}`},
					{"POST", "/api/v1/heartbeat", `{"phase":"Train","event":"ping"}`},
					{"GET", "/api/v1/phases", ""},
					{"GET", "/-/ready", ""},
				} {
					if code, body := p.do(r.method, r.path, []byte(r.body), "", ""); code != 200 {
						t.Errorf("%s %s while a push hangs: %d %q", r.method, r.path, code, body)
					}
				}
				select {
				case a := <-done:
					t.Fatalf("the webhook answered (%d after %v) before the other requests were done", a.code, a.elapsed)
				default:
				}
			}

			a := <-done
			if a.err != nil {
				t.Fatal(a.err)
			}
			t.Logf("%s: %d after %v: %q", tc.fault, a.code, a.elapsed.Round(time.Millisecond), a.body)
			if a.code != tc.code {
				t.Errorf("webhook answered %d, want %d: %q", a.code, tc.code, a.body)
			}
			if bound := barkTimeout + webhookMargin; a.elapsed > bound {
				t.Errorf("webhook answered after %v, over the bound of --bark.timeout + margin = %v", a.elapsed, bound)
			}
			if want := "phone.bark.env:1 failed: " + tc.class; !strings.Contains(a.body, want) {
				t.Errorf("answer %q lacks %q", a.body, want)
			}
			m := p.metrics()
			for series, want := range map[string]float64{
				`lavender_bark_pushes_total{result="failed",target="phone.bark.env:1"}`: 1,
				`lavender_bark_pushes_total{result="ok",target="phone.bark.env:1"}`:     0,
				`lavender_webhook_requests_total{code="` + strconv.Itoa(tc.code) + `"}`: 1,
				`lavender_webhook_alerts_total{action="failed",status="firing"}`:        1,
				`lavender_runlog_write_errors_total{writer="bark"}`:                     0,
			} {
				if got := sample(m, series); got != want {
					t.Errorf("%s = %v, want %v", series, got, want)
				}
			}
			if log := hRunLog(t, logDir); !strings.Contains(log, " BARK swap 54% sent ok=0 fail=1\n") {
				t.Errorf("run log lacks the failed push:\n%s", log)
			}
			if !strings.Contains(p.logs.String(), `msg="push failed" target=phone.bark.env:1 class=`) || !strings.Contains(p.logs.String(), tc.class) {
				t.Errorf("log lacks the failure:\n%s", p.logs)
			}
		})
	}
}

// hMount mounts a tmpfs of size bytes at a fresh dir, or skips the test
// when this machine does not allow it (not root, or no CAP_SYS_ADMIN).
func hMount(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes to dir/filler until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for i := 0; i < 1<<16; i++ {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatal("the tmpfs never filled")
}

// TestLogsDirFaults: with the logs dir full, read-only or replaced by a
// file, pushes still go out and are answered 200, heartbeats still work,
// every lost write is counted, the failure is logged once (not once per
// write) and nothing crashes; once the dir recovers, records resume.
func TestLogsDirFaults(t *testing.T) {
	for _, tc := range []struct {
		name           string
		mount          bool
		break_, repair func(t *testing.T, mnt, logDir string)
	}{
		{
			name: "full", mount: true,
			break_: func(t *testing.T, mnt, _ string) { fill(t, mnt) },
			repair: func(t *testing.T, mnt, _ string) { os.Remove(filepath.Join(mnt, "filler")) },
		},
		{
			name: "read-only", mount: true,
			break_: func(t *testing.T, mnt, _ string) { hRun(t, "mount", "-o", "remount,ro", mnt) },
			repair: func(t *testing.T, mnt, _ string) { hRun(t, "mount", "-o", "remount,rw", mnt) },
		},
		{
			name: "replaced by a file",
			break_: func(t *testing.T, _, logDir string) {
				if err := os.Rename(logDir, logDir+".aside"); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(logDir, []byte("not a dir\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			repair: func(t *testing.T, _, logDir string) {
				os.Remove(logDir)
				if err := os.Rename(logDir+".aside", logDir); err != nil {
					t.Fatal(err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := t.TempDir()
			if tc.mount {
				mnt = hMount(t, 256<<10)
			}
			logDir := filepath.Join(mnt, "logs")
			bark := newFakeBark(t)
			barkDir := barkConfigDir(t, map[string]string{"phone.bark.env": bark.URL + "/KEY/$0\n"})
			// 40 pushes in a minute: storm control off, so each is a push.
			p := hStart(t, nil, append(hServeArgs(t, barkDir, logDir), "--bark.max-per-minute=0")...)
			if code, body := p.do("POST", "/api/v1/heartbeat", []byte(`{"phase":"Train","event":"start"}`), "", ""); code != 200 {
				t.Fatalf("heartbeat before the fault: %d %s", code, body)
			}
			hRunLog(t, logDir)

			tc.break_(t, mnt, logDir)
			// Enough pushes that the log must compact (a new file) at least
			// once: on a full tmpfs an append inside the file's last page
			// still succeeds, a compaction cannot.
			const n = 40
			for i := range n {
				code, body := p.do("POST", "/webhook", hSwapWebhook(i), "", "")
				if code != 200 || !strings.Contains(body, "pushed=1") {
					t.Fatalf("webhook %d with the logs dir %s: %d %q", i, tc.name, code, body)
				}
			}
			for _, hb := range []string{
				`{"phase":"Train","event":"ping"}`,
				`{"phase":"Eval","event":"start"}`,
				`{"phase":"Eval","event":"end"}`,
				`{"phase":"Train","event":"end","status":"failed"}`,
			} {
				if code, body := p.do("POST", "/api/v1/heartbeat", []byte(hb), "", ""); code != 200 {
					t.Errorf("heartbeat %s with the logs dir %s: %d %s", hb, tc.name, code, body)
				}
			}
			if got := len(bark.requests()); got != n {
				t.Errorf("Bark got %d pushes, want %d", got, n)
			}
			m := p.metrics()
			barkErrs := sample(m, `lavender_runlog_write_errors_total{writer="bark"}`)
			expErrs := sample(m, `lavender_runlog_write_errors_total{writer="exporter"}`)
			t.Logf("logs dir %s: %v bark and %v exporter write errors counted", tc.name, barkErrs, expErrs)
			if barkErrs < 1 || expErrs < 1 {
				t.Errorf("write errors not counted: bark %v, exporter %v", barkErrs, expErrs)
			}
			logs := p.logs.String()
			if c := strings.Count(logs, "run log append failed"); c != 1 {
				t.Errorf("the bridge logged the failure %d times in well under a minute, want once", c)
			}
			exporterLines := 0
			for _, msg := range []string{"run-log entry lost", "phase table not saved", "cannot start a run log", "logs dir unreadable"} {
				exporterLines += strings.Count(logs, msg)
			}
			if exporterLines != 1 {
				t.Errorf("the exporter logged %d failures in well under a minute, want 1:\n%s", exporterLines, logs)
			}
			if strings.Contains(logs, "panic") {
				t.Errorf("panic in the log:\n%s", logs)
			}

			tc.repair(t, mnt, logDir)
			if code, body := p.do("POST", "/webhook", hSwapWebhook(n), "", ""); code != 200 {
				t.Fatalf("webhook after repair: %d %q", code, body)
			}
			if code, body := p.do("POST", "/api/v1/heartbeat", []byte(`{"phase":"After","event":"start"}`), "", ""); code != 200 {
				t.Fatalf("heartbeat after repair: %d %q", code, body)
			}
			log := hRunLog(t, logDir)
			if !strings.Contains(log, " BARK swap 54% sent ok=1 fail=0\n") || !strings.Contains(log, " START After\n") {
				t.Errorf("records did not resume after repair:\n%s", log)
			}
		})
	}
}

func hRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v %s", name, strings.Join(args, " "), err, out)
	}
}

// TestBarkEnvPermissionWarning: a target file others can read is warned
// about at start-up by every command that loads targets; a 0600 one is not.
func TestBarkEnvPermissionWarning(t *testing.T) {
	bark := newFakeBark(t)
	const warning = "readable by group or others"
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o600, 0o400} {
		barkDir := barkConfigDir(t, map[string]string{"phone.bark.env": bark.URL + "/KEY/$0\n"})
		if err := os.Chmod(filepath.Join(barkDir, "phone.bark.env"), mode); err != nil {
			t.Fatal(err)
		}
		wantWarning := mode&0o044 != 0
		for _, args := range [][]string{
			hServeArgs(t, barkDir, t.TempDir()),
			{"bridge", "--bark.config-dir=" + barkDir, "--runlog.dir=" + t.TempDir()},
		} {
			p := hStart(t, nil, args...)
			if err := p.stop(); err != nil {
				t.Fatal(err)
			}
			logs := p.logs.String()
			if got := strings.Contains(logs, warning) && strings.Contains(logs, "chmod 600") && strings.Contains(logs, "phone.bark.env"); got != wantWarning {
				t.Errorf("%s with mode %04o: warning %v, want %v:\n%s", args[0], mode, got, wantWarning, logs)
			}
		}
		stdout, stderr, err := runCLI(t, "bark", "check", "--bark.config-dir="+barkDir)
		if err != nil {
			t.Fatalf("bark check: %v %s", err, stderr)
		}
		if got := strings.Contains(stderr, warning); got != wantWarning {
			t.Errorf("bark check with mode %04o: warning %v, want %v: %q %q", mode, got, wantWarning, stdout, stderr)
		}
	}
}

// hTLS writes a self-signed certificate for 127.0.0.1 and its key, and
// returns their paths and a client that trusts only that certificate.
func hTLS(t *testing.T, dir string) (certFile, keyFile string, client *http.Client) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "lavender test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	return certFile, keyFile, client
}

// hWebConfig writes an exporter-toolkit web config with TLS and one
// bcrypt basic-auth user.
func hWebConfig(t *testing.T, user, pass string) (path string, client *http.Client) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile, client := hTLS(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "web.yml")
	cfg := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: %s\n", certFile, keyFile, user, hash)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, client
}

// TestAuthEveryEndpoint: with TLS and basic auth from --web.config.file,
// every endpoint of serve, exporter and bridge answers 401 without
// credentials or with wrong ones, nothing is acted on, and everything
// works with the right ones.
func TestAuthEveryEndpoint(t *testing.T) {
	const user, pass = "alertmanager", "correct horse battery staple"
	webConfig, client := hWebConfig(t, user, pass)
	bark := newFakeBark(t)
	barkDir := barkConfigDir(t, map[string]string{"phone.bark.env": bark.URL + "/KEY/$0\n"})

	type call struct {
		method, path string
		body         []byte
		want         int // with credentials
	}
	webhook := call{"POST", "/webhook", hSwapWebhook(1), 200}
	reload := call{"POST", "/-/reload", nil, 200}
	metrics := call{"GET", "/metrics", nil, 200}
	api := []call{
		{"POST", "/api/v1/heartbeat", []byte(`{"phase":"Train","event":"start"}`), 200},
		{"GET", "/api/v1/phases", nil, 200},
		{"GET", "/api/v1/status", nil, 200}, // the status page's JSON; "/" is below
		{"POST", "/api/v1/runs", []byte(`{"header":"auth test"}`), 201},
	}
	lifecycle := []call{{"GET", "/-/healthy", nil, 200}, {"GET", "/-/ready", nil, 200}, {"GET", "/", nil, 200}}

	for _, tc := range []struct {
		args  []string
		calls []call
	}{
		{hServeArgs(t, barkDir, t.TempDir()), append(append([]call{webhook, reload, metrics}, api...), lifecycle...)},
		{[]string{"exporter", "--path.procfs=" + hProcfs(t), "--runlog.dir=" + t.TempDir()}, append(append([]call{metrics}, api...), lifecycle...)},
		{[]string{"bridge", "--bark.config-dir=" + barkDir, "--runlog.dir=" + t.TempDir()}, append([]call{webhook, reload, metrics}, lifecycle...)},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			p := hStart(t, client, append(tc.args, "--web.config.file="+webConfig)...)
			pushesBefore := len(bark.requests())
			for _, c := range tc.calls {
				for _, cred := range [][2]string{{"", ""}, {user, "wrong"}, {"intruder", pass}} {
					code, body := p.do(c.method, c.path, c.body, cred[0], cred[1])
					if code != http.StatusUnauthorized {
						t.Errorf("%s %s as %q: %d %q, want 401", c.method, c.path, cred[0], code, body)
					}
				}
			}
			if n := len(bark.requests()) - pushesBefore; n != 0 {
				t.Errorf("unauthenticated webhooks pushed %d times", n)
			}
			for _, c := range tc.calls {
				if code, body := p.do(c.method, c.path, c.body, user, pass); code != c.want {
					t.Errorf("%s %s with credentials: %d %q, want %d", c.method, c.path, code, body, c.want)
				}
			}
			if tc.args[0] != "exporter" {
				if n := len(bark.requests()) - pushesBefore; n != 1 {
					t.Errorf("authenticated webhook pushed %d times, want 1", n)
				}
			}
			// Plain HTTP to the TLS port gets no service either.
			plain := &hProc{t: t, base: strings.Replace(p.base, "https://", "http://", 1), client: &http.Client{Timeout: 10 * time.Second}}
			if code, _, err := plain.try("GET", "/metrics", nil, user, pass); err == nil && code == 200 {
				t.Errorf("plain HTTP on the TLS listener answered 200")
			}
		})
	}
}

// TestRestartKeepsPhase: `serve --run.resume` killed with SIGKILL in the
// middle of a phase comes back with the phase active, its start time and
// heartbeats as last saved, and the phase ends normally afterwards.
func TestRestartKeepsPhase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := hBuild(t)
	logDir := t.TempDir()
	procfs := hProcfs(t)
	barkDir := barkConfigDir(t, nil)
	start := func() (*exec.Cmd, string) {
		port := freePort(t)
		cmd := exec.Command(bin, "serve", "--web.listen-address=127.0.0.1:"+port, "--path.procfs="+procfs,
			"--runlog.dir="+logDir, "--bark.config-dir="+barkDir, "--watchdog.interval=0", "--run.resume")
		cmd.Stderr = &lockedBuffer{}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		base := "http://127.0.0.1:" + port
		waitFor(t, "serve ready", func() bool { code, _ := httpDoQuiet(base + "/-/ready"); return code == 200 })
		return cmd, base
	}
	first, base := start()
	if code, body := httpDo(t, "POST", base+"/api/v1/heartbeat", []byte(`{"phase":"Pretrain 1/3","event":"start"}`)); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	var before struct {
		Phases []struct {
			Name    string    `json:"name"`
			Status  string    `json:"status"`
			Started time.Time `json:"started"`
		} `json:"phases"`
	}
	_, body := httpDo(t, "GET", base+"/api/v1/phases", nil)
	if err := json.Unmarshal([]byte(body), &before); err != nil {
		t.Fatalf("phases before the kill: %v\n%s", err, body)
	}
	run, _ := runlog.CurrentPath(logDir)

	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()

	_, base = start()
	if now, _ := runlog.CurrentPath(logDir); now != run {
		t.Errorf("restart with --run.resume started run %s, want %s", now, run)
	}
	var after = before
	after.Phases = nil
	_, body = httpDo(t, "GET", base+"/api/v1/phases", nil)
	if err := json.Unmarshal([]byte(body), &after); err != nil {
		t.Fatal(err)
	}
	if len(after.Phases) != 1 || len(before.Phases) != 1 || after.Phases[0].Status != "active" ||
		!after.Phases[0].Started.Equal(before.Phases[0].Started) {
		t.Fatalf("phases after kill -9 and restart: %s\nbefore: %+v", body, before)
	}
	_, m := httpDo(t, "GET", base+"/metrics", nil)
	if sample(m, `lavender_phase_active{phase="Pretrain 1/3"}`) != 1 {
		t.Errorf("lavender_phase_active is not 1 after the restart")
	}
	if code, body := httpDo(t, "POST", base+"/api/v1/heartbeat", []byte(`{"phase":"Pretrain 1/3","event":"end"}`)); code != 200 {
		t.Fatalf("end after restart: %d %s", code, body)
	}
	log := hRunLog(t, logDir)
	if strings.Count(log, "START Pretrain 1/3") != 1 || strings.Count(log, "END   Pretrain 1/3") != 1 || strings.Count(log, "RUN start") != 1 {
		t.Errorf("run log after restart:\n%s", log)
	}
}

// hBuild builds the lavender binary into the test's temp dir.
func hBuild(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lavender")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestPhaseOverTLS: `lavender phase` reaches an exporter behind TLS with a
// private CA through --tls.ca-file, and refuses it without.
func TestPhaseOverTLS(t *testing.T) {
	const user, pass = "trainer", "s3cret"
	webConfig, client := hWebConfig(t, user, pass)
	p := hStart(t, client, "exporter", "--path.procfs="+hProcfs(t), "--runlog.dir="+t.TempDir(), "--web.config.file="+webConfig)
	passwordFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(passwordFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(filepath.Dir(webConfig), "cert.pem") // self-signed: the cert is its own CA
	args := []string{"phase", "start", "Train", "--url", p.base, "--username", user, "--password-file", passwordFile}
	if _, _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without --tls.ca-file: %v, want a certificate error", err)
	}
	if _, _, err := runCLI(t, append(args, "--tls.ca-file", caFile)...); err != nil {
		t.Errorf("with --tls.ca-file: %v", err)
	}
	if _, _, err := runCLI(t, append(args, "--tls.ca-file", passwordFile)...); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("with a CA file that is not PEM: %v", err)
	}
}
