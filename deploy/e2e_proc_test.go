package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Helpers of the end-to-end test (e2e_test.go): child processes, a fake
// procfs and a Bark-compatible server.

// e2eBuffer collects a child's output; the child writes while the test reads.
type e2eBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *e2eBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *e2eBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// e2eProc is one child process, alone in its own process group so that
// the cleanup reaches anything it spawned.
type e2eProc struct {
	name string
	cmd  *exec.Cmd
	out  *e2eBuffer
	done chan struct{} // closed once the process has exited
	err  error         // Wait's result, valid once done is closed
}

// startE2EProc starts bin in dir. The cleanup sends SIGTERM to its process
// group, then SIGKILL if it has not exited within 10s, and prints the
// process's output if the test failed.
func startE2EProc(t *testing.T, dir, name, bin string, args ...string) *e2eProc {
	t.Helper()
	p := &e2eProc{name: name, out: &e2eBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = e2eEnv()
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// Pdeathsig: if the test binary itself dies (go test's -timeout panics),
	// the children go with it instead of holding ports.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p.cmd.WaitDelay = 5 * time.Second // output pipes held open by a grandchild
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if out := p.out.String(); strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race", name)
		}
		if t.Failed() {
			t.Logf("----- output of %s (%s) -----\n%s", name, strings.Join(p.cmd.Args, " "), tail(p.out.String(), 64<<10))
		}
	})
	return p
}

func (p *e2eProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process group and reports a process that exited before it
// was told to, or that did not exit cleanly on SIGTERM.
func (p *e2eProc) stop(t *testing.T) {
	if p.exited() {
		t.Errorf("%s exited on its own while the test still needed it: %v", p.name, p.err)
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("%s: exit after SIGTERM: %v", p.name, p.err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%s did not exit within 10s of SIGTERM; killing it", p.name)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			t.Errorf("%s did not exit within 5s of SIGKILL", p.name)
		}
	}
	// Anything left in the group (nothing is expected) goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// e2eEnv is the test's environment without LAVENDER_* variables, which
// kong would read as lavender flags (LAVENDER_E2E among them is harmless,
// but a developer's LAVENDER_BARK_CONFIG_DIR would not be).
func e2eEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LAVENDER_") {
			env = append(env, kv)
		}
	}
	return env
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// e2eFreeAddrs returns n distinct 127.0.0.1 addresses with ports the
// kernel just handed out: all are held open until the last is chosen, so
// no two are the same. Each is free again when a child binds it; another
// program taking it in between makes the child exit, which the test
// reports with the child's output.
func e2eFreeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs
}

// e2eProcfs is a procfs with just meminfo and vmstat, each rewritten
// atomically so lavender never reads half a file.
type e2eProcfs struct {
	t   *testing.T
	dir string
}

// e2eSwap is what the fake meminfo says about swap, in meminfo's kB.
type e2eSwap struct {
	TotalKB, UsedKB uint64
}

func (s e2eSwap) usedBytes() uint64  { return s.UsedKB * 1024 }
func (s e2eSwap) totalBytes() uint64 { return s.TotalKB * 1024 }
func (s e2eSwap) ratio() float64     { return float64(s.UsedKB) / float64(s.TotalKB) }

func newE2EProcfs(t *testing.T) *e2eProcfs {
	p := &e2eProcfs{t: t, dir: t.TempDir()}
	p.write("vmstat", "pgpgin 1000\npgpgout 2000\npswpin 100\npswpout 200\noom_kill 2\n")
	if err := os.Mkdir(filepath.Join(p.dir, "pressure"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.write("pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=500000\n")
	return p
}

func (p *e2eProcfs) write(name, content string) {
	p.t.Helper()
	tmp := filepath.Join(p.dir, filepath.Dir(name), "."+filepath.Base(name)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, name)); err != nil {
		p.t.Fatal(err)
	}
}

// setOOMKills sets vmstat's oom_kill, the OOM kills since boot.
func (p *e2eProcfs) setOOMKills(n uint64) {
	p.t.Helper()
	p.write("vmstat", fmt.Sprintf("pgpgin 1000\npgpgout 2000\npswpin 100\npswpout 200\noom_kill %d\n", n))
}

// setSwap fills percent % of totalKB of swap and returns the figures written.
func (p *e2eProcfs) setSwap(totalKB, percent uint64) e2eSwap {
	p.t.Helper()
	s := e2eSwap{TotalKB: totalKB, UsedKB: totalKB * percent / 100}
	p.write("meminfo", fmt.Sprintf(
		"MemTotal:       65536000 kB\n"+
			"MemFree:         1234567 kB\n"+
			"MemAvailable:    9830400 kB\n"+
			"Buffers:          102400 kB\n"+
			"Cached:          4096000 kB\n"+
			"SwapCached:      1048576 kB\n"+
			"SwapTotal:      %8d kB\n"+
			"SwapFree:       %8d kB\n", s.TotalKB, s.TotalKB-s.UsedKB))
	return s
}

// e2eBarkPush is one request as bark-server sees it: it routes on the raw
// path (/:key/:body, /:key/:title/:body, /:key/:title/:subtitle/:body) and
// query-unescapes each segment, so a raw "/" in a message would show up as
// a title here.
type e2eBarkPush struct {
	URI                   string // raw request URI
	Key                   string
	Title, Subtitle, Body string
}

// e2eBark is a Bark-compatible server on 127.0.0.1 that accepts the device
// key "KEY" and records every request.
type e2eBark struct {
	*httptest.Server
	mu     sync.Mutex
	pushes []e2eBarkPush
}

func newE2EBark(t *testing.T) *e2eBark {
	b := &e2eBark{}
	b.Server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.Close)
	return b
}

func (b *e2eBark) serve(w http.ResponseWriter, r *http.Request) {
	p := e2eBarkPush{URI: r.RequestURI}
	b.mu.Lock()
	b.pushes = append(b.pushes, p) // recorded even if malformed: every request counts
	i := len(b.pushes) - 1
	b.mu.Unlock()

	code, message := http.StatusOK, "success"
	rawPath, _, _ := strings.Cut(r.RequestURI, "?")
	segs := strings.Split(strings.TrimPrefix(rawPath, "/"), "/")
	var err error
	unescape := func(s string) string {
		u, e := url.QueryUnescape(s)
		err = errors.Join(err, e)
		return u
	}
	switch len(segs) {
	case 2:
		p.Key, p.Body = segs[0], unescape(segs[1])
	case 3:
		p.Key, p.Title, p.Body = segs[0], unescape(segs[1]), unescape(segs[2])
	case 4:
		p.Key, p.Title, p.Subtitle, p.Body = segs[0], unescape(segs[1]), unescape(segs[2]), unescape(segs[3])
	default:
		code, message = http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path
	}
	switch {
	case code != http.StatusOK:
	case err != nil:
		code, message = http.StatusBadRequest, "url unescape error"
	case p.Key != "KEY":
		code, message = http.StatusBadRequest, "failed to get device token: device token invalid"
	}
	b.mu.Lock()
	b.pushes[i] = p
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "message": message, "timestamp": time.Now().Unix()})
}

func (b *e2eBark) received() []e2eBarkPush {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]e2eBarkPush(nil), b.pushes...)
}
