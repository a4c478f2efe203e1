package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// --- child processes ---

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string // file with its stdout and stderr
	done chan struct{}
	err  error
}

var (
	procsMu sync.Mutex
	procs   []*proc
)

// start runs a child with its output in dir/<name>.log. The child dies with
// lavbench (Pdeathsig) and is killed by killAll at the latest.
func start(dir, name string, env []string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	procsMu.Lock()
	procs = append(procs, p)
	procsMu.Unlock()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM, then SIGKILL after 15 s.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) tail() string {
	data, _ := os.ReadFile(p.log)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}

func killAll() {
	procsMu.Lock()
	ps := slices.Clone(procs)
	procs = nil
	procsMu.Unlock()
	for _, p := range ps {
		p.stop()
	}
}

// freePort returns a port that was free a moment ago on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freeAddr() (string, error) {
	p, err := freePort()
	return "127.0.0.1:" + strconv.Itoa(p), err
}

// waitHTTP polls url until it answers 200, the child exits, or timeout.
func waitHTTP(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.tail())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s not ready within %s\n%s", p.name, url, timeout, p.tail())
}

// --- /proc readings ---

// rssKiB reads VmRSS of pid.
func rssKiB(pid int) (int, error) { return statusKiB(pid, "VmRSS") }

// anonKiB reads RssAnon of pid: its heap, stacks and other private memory,
// without the executable's pages (RssFile), which any program linking the
// same libraries maps alike.
func anonKiB(pid int) (int, error) { return statusKiB(pid, "RssAnon") }

// statusKiB reads the "field:  N kB" line of /proc/PID/status.
func statusKiB(pid int, field string) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, fmt.Errorf("no %s for pid %d", field, pid)
}

// cpuTicks reads utime+stime of pid, in clock ticks (USER_HZ, 100 on Linux).
func cpuTicks(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the ")" that closes comm: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return u + s, nil
}

const userHZ = 100

func mib(kib int) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// --- Bark stand-in ---

// barkServer answers like Bark (`{"code":200,...}`) on /<key>/<message>.
// Keys starting with "hang" never answer until the client gives up (at most
// one minute). Every accepted push is timestamped on arrivals, and with its
// text on messages.
type barkServer struct {
	srv      *http.Server
	url      string
	arrivals chan time.Time
	messages chan barkMessage
	mu       sync.Mutex
	count    int
}

// barkMessage is one accepted push: when it arrived and its text (the
// path after the key, unescaped).
type barkMessage struct {
	at   time.Time
	text string
}

func newBarkServer() (*barkServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &barkServer{url: "http://" + l.Addr().String(), arrivals: make(chan time.Time, 1<<16), messages: make(chan barkMessage, 1<<10)}
	b.srv = &http.Server{Handler: http.HandlerFunc(b.serve), ReadHeaderTimeout: 10 * time.Second}
	go b.srv.Serve(l)
	return b, nil
}

func (b *barkServer) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	key, text, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if strings.HasPrefix(key, "hang") {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		return
	}
	b.mu.Lock()
	b.count++
	b.mu.Unlock()
	select {
	case b.arrivals <- now:
	default:
	}
	select {
	case b.messages <- barkMessage{at: now, text: text}:
	default:
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"code": 200, "message": "success", "timestamp": now.Unix()})
}

func (b *barkServer) pushes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count
}

func (b *barkServer) close() { b.srv.Close() }

// writeTargets writes one *.bark.env file per key into a new directory.
func writeTargets(dir string, b *barkServer, keys ...string) (string, error) {
	cfg := filepath.Join(dir, "bark")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		return "", err
	}
	for i, k := range keys {
		name := filepath.Join(cfg, fmt.Sprintf("t%d.bark.env", i))
		if err := os.WriteFile(name, []byte(b.url+"/"+k+"/$0\n"), 0o600); err != nil {
			return "", err
		}
	}
	return cfg, nil
}

// --- fake procfs ---

func writeMeminfo(dir string, usedRatio float64) error {
	const totalKB = 32 << 20
	free := totalKB - uint64(float64(totalKB)*usedRatio)
	content := fmt.Sprintf("MemTotal:       65536000 kB\nMemFree:         1234567 kB\nMemAvailable:    9830400 kB\n"+
		"SwapCached:      1048576 kB\nSwapTotal:      %8d kB\nSwapFree:       %8d kB\n", totalKB, free)
	return writeAtomic(filepath.Join(dir, "meminfo"), content)
}

func writeAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func newFakeProcfs(dir string, usedRatio float64) (string, error) {
	p := filepath.Join(dir, "procfs")
	if err := os.MkdirAll(p, 0o755); err != nil {
		return "", err
	}
	if err := writeAtomic(filepath.Join(p, "vmstat"), "pswpin 100\npswpout 200\n"); err != nil {
		return "", err
	}
	return p, writeMeminfo(p, usedRatio)
}

// --- statistics ---

type durations []time.Duration

func (d durations) sorted() durations {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

// pct is the nearest-rank percentile q (0-100) of sorted d.
func (d durations) pct(q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*q/100+0.5) - 1
	return d[max(0, min(i, len(d)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
func secs(d time.Duration) string {
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minMax(xs []float64) (float64, float64) {
	return slices.Min(xs), slices.Max(xs)
}

// tempDir makes a scratch directory under $TMPDIR that is removed on return.
func tempDir() (string, func(), error) {
	d, err := os.MkdirTemp("", "lavbench-")
	return d, func() { os.RemoveAll(d) }, err
}

// newRig is what most sections start with: a temp dir and a Bark stand-in;
// cleanup stops the one and removes the other.
func newRig() (dir string, bark *barkServer, cleanup func(), err error) {
	dir, removeDir, err := tempDir()
	if err != nil {
		return "", nil, nil, err
	}
	bark, err = newBarkServer()
	if err != nil {
		removeDir()
		return "", nil, nil, err
	}
	return dir, bark, func() {
		bark.close()
		removeDir()
	}, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// get fetches url once with headers and returns the body length on the wire.
func get(client *http.Client, url string, hdr map[string]string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return int(n), err
}

// rawClient never decompresses, so byte counts are what crossed the wire.
func rawClient(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DisableCompression: true, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, Proxy: nil,
	}}
}

// startBridge runs `lavender bridge` from dir with the targets in barkDir and
// returns it and its base URL once it is ready.
func startBridge(ctx context.Context, lavender, dir, barkDir string, timeout time.Duration, extra ...string) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	args := append([]string{"bridge", "--web.listen-address=" + addr,
		"--runlog.dir=" + filepath.Join(dir, "logs"), "--bark.config-dir=" + barkDir, "--bark.timeout=" + timeout.String()}, extra...)
	p, err := start(dir, "bridge", nil, lavender, args...)
	if err != nil {
		return nil, "", err
	}
	base := "http://" + addr
	if err := waitHTTP(ctx, p, base+"/-/ready", 20*time.Second); err != nil {
		return p, "", err
	}
	return p, base, nil
}
