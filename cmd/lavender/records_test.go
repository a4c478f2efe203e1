package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lavender/runlog"
)

// messages returns the entries of the run log at path without their times.
func messages(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := runlog.Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	var out []string
	for _, e := range f.AllEntries() {
		out = append(out, e[len("15:04:05 "):])
	}
	return out
}

// TestServeResumeWritesRunResume: serve --run.resume says in the run log
// that it came back, so entries after a RUN stop are not a mystery.
func TestServeResumeWritesRunResume(t *testing.T) {
	logDir := filepath.Join(t.TempDir(), "logs")
	barkDir := t.TempDir()
	first := hStart(t, nil, hServeArgs(t, barkDir, logDir)...)
	if code, body := first.do("POST", "/api/v1/heartbeat", []byte(`{"phase":"SFT","event":"start"}`), "", ""); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	second := hStart(t, nil, hServeArgs(t, barkDir, logDir, "--run.resume")...)
	if code, body := second.do("POST", "/api/v1/heartbeat", []byte(`{"phase":"SFT","event":"end"}`), "", ""); code != 200 {
		t.Fatalf("end after resume: %d %s", code, body)
	}
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}
	path, err := runlog.CurrentPath(logDir)
	if err != nil {
		t.Fatal(err)
	}
	got := messages(t, path)
	device := strings.TrimPrefix(got[0], "RUN start  ")
	want := []string{"RUN start  " + device, "START SFT", "RUN stop", "RUN resume  " + device, "END   SFT 0s", "RUN stop"}
	if device == got[0] || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("run log\n%q\nwant\n%q", got, want)
	}
}

// TestServeWithOddFilesInLogsDir runs the real binary with a FIFO or a
// symlink to /dev/zero where it reads: it must answer, stop on SIGTERM and
// move the odd file aside, rather than hang or fill memory.
func TestServeWithOddFilesInLogsDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := hBuild(t)
	for _, tc := range []struct {
		name, file string // file: "table" or "log"
		make       func(path string) error
	}{
		{"phase table is a FIFO", "table", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"phase table is /dev/zero", "table", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"run log is a FIFO", "log", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"run log is /dev/zero", "log", func(p string) error { return os.Symlink("/dev/zero", p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logDir := filepath.Join(t.TempDir(), "logs")
			l, err := runlog.Start(runlog.Options{Dir: logDir}, "", runlog.RunStart)
			if err != nil {
				t.Fatal(err)
			}
			odd := l.Path()
			if tc.file == "table" {
				odd = strings.TrimSuffix(l.Path(), ".log") + ".phases.json"
			} else if err := os.Remove(odd); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(odd); err != nil {
				t.Fatal(err)
			}
			p := startServeGuarded(t, bin, "--path.procfs="+hProcfs(t), "--watchdog.interval=0",
				"--runlog.dir="+logDir, "--bark.config-dir="+t.TempDir(), "--run.resume")
			client := &http.Client{Timeout: 30 * time.Second}
			for _, path := range []string{"/", "/api/v1/status", "/api/v1/phases"} {
				resp, err := client.Get(p.base + path)
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 2<<20))
				resp.Body.Close()
				if resp.StatusCode != 200 || len(body) > 1<<20 {
					t.Errorf("GET %s: %d, %d bytes", path, resp.StatusCode, len(body))
				}
			}
			resp, err := client.Post(p.base+"/api/v1/heartbeat", "application/json", strings.NewReader(`{"phase":"Train","event":"start"}`))
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("heartbeat: %v %v", resp, err)
			}
			if resp != nil {
				resp.Body.Close()
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-p.done:
				p.done <- err
				if err != nil {
					t.Errorf("exit after SIGTERM: %v\n%s", err, p.stderr)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("serve did not exit within 30s of SIGTERM\n%s", p.stderr)
			}
			if st, err := os.Lstat(odd + ".damaged"); err != nil || st.Mode().IsRegular() {
				t.Errorf("the odd file was not moved aside: %v %v", st, err)
			}
			if !strings.Contains(p.stderr.String(), "damaged") && !strings.Contains(p.stderr.String(), "not a regular file") {
				t.Errorf("nothing logged about the odd file:\n%s", p.stderr)
			}
			if st, err := os.Lstat(l.Path()); err != nil || !st.Mode().IsRegular() {
				t.Fatalf("the run log is not a regular file after serve: %v %v", st, err)
			}
			got := messages(t, l.Path())
			if got[len(got)-1] != "RUN stop" {
				t.Errorf("run log after the repair: %q", got)
			}
		})
	}
}

// startServeGuarded starts `lavender serve` like hStartServeProc, but a
// serve that takes connections and never answers (as one blocked on a
// FIFO did) fails the test instead of hanging it; the process is killed.
func startServeGuarded(t *testing.T, bin string, args ...string) *hServeProc {
	t.Helper()
	port := freePort(t)
	p := &hServeProc{t: t, base: "http://127.0.0.1:" + port, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"serve", "--web.listen-address=127.0.0.1:" + port}, args...)...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		p.done <- nil
	})
	client := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := client.Get(p.base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("serve exited: %v\n%s", err, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never answered /-/ready within a minute\n%s", p.stderr)
		}
	}
}

// TestStatusShowsTheTailOfAHugeRunLog: a 50 MB run log is shown as its
// last --runlog.max-bytes on / and /api/v1/status, and the next append
// brings the file back under the cap.
func TestStatusShowsTheTailOfAHugeRunLog(t *testing.T) {
	logDir := filepath.Join(t.TempDir(), "logs")
	l, err := runlog.Start(runlog.Options{Dir: logDir}, "", runlog.RunStart)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(l.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	line := "00:00:00 BARK swap 54% sent ok=1 fail=0 " + strings.Repeat("x", 30) + "\n"
	chunk := strings.Repeat(line, (1<<20)/len(line))
	for range 50 {
		if _, err := fh.WriteString(chunk); err != nil {
			t.Fatal(err)
		}
	}
	fh.WriteString("00:00:01 the newest line\n")
	fh.Close()

	p := hStart(t, nil, "exporter", "--path.procfs="+hProcfs(t), "--runlog.dir="+logDir)
	code, body := p.do("GET", "/api/v1/status", nil, "", "")
	var status struct {
		RunLog string `json:"run_log"`
	}
	if err := json.Unmarshal([]byte(body), &status); code != 200 || err != nil {
		t.Fatalf("GET /api/v1/status: %d %v", code, err)
	}
	if len(status.RunLog) > runlog.DefaultMaxBytes || !strings.HasSuffix(status.RunLog, "00:00:01 the newest line\n") {
		t.Errorf("run_log is %d bytes ending %q, want at most %d ending in the newest line", len(status.RunLog), status.RunLog[max(0, len(status.RunLog)-30):], runlog.DefaultMaxBytes)
	}
	if code, page := p.do("GET", "/", nil, "", ""); code != 200 || len(page) > 256<<10 || !strings.Contains(page, "the newest line") {
		t.Errorf("GET /: %d, %d bytes", code, len(page))
	}
	if code, body := p.do("POST", "/api/v1/heartbeat", []byte(`{"phase":"Train","event":"start"}`), "", ""); code != 200 {
		t.Fatalf("heartbeat: %d %s", code, body)
	}
	log := hRunLog(t, logDir) // checks the cap and that it parses
	if !strings.Contains(log, "the newest line") || !strings.HasSuffix(log, " START Train\n") {
		t.Errorf("repaired run log:\n%s", log)
	}
}

// TestServeStartsWhenLogsDirIsAFile: serve does not exit when its logs
// dir cannot be listed; it counts the failure and recovers once the dir
// is usable.
func TestServeStartsWhenLogsDirIsAFile(t *testing.T) {
	logDir := filepath.Join(t.TempDir(), "logs")
	if err := os.WriteFile(logDir, []byte("not a dir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := hStart(t, nil, hServeArgs(t, t.TempDir(), logDir)...)
	if n := sample(p.metrics(), `lavender_runlog_write_errors_total{writer="exporter"}`); n < 1 {
		t.Errorf("write errors counted: %v, want at least 1", n)
	}
	if !strings.Contains(p.logs.String(), "not a directory") {
		t.Errorf("the problem is not logged:\n%s", p.logs)
	}
	if code, body := p.do("POST", "/api/v1/heartbeat", []byte(`{"phase":"Train","event":"start"}`), "", ""); code != 200 {
		t.Fatalf("heartbeat while the dir is a file: %d %s", code, body)
	}
	os.Remove(logDir)
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, body := p.do("POST", "/api/v1/heartbeat", []byte(`{"phase":"Eval","event":"start"}`), "", ""); code != 200 {
		t.Fatalf("heartbeat once the dir is usable: %d %s", code, body)
	}
	if log := hRunLog(t, logDir); !strings.HasSuffix(log, " START Eval\n") {
		t.Errorf("records did not resume:\n%s", log)
	}
}

// TestRunlogAcrossTimeZones runs the binary as the issue did: serve's run
// made in UTC, `runlog new` in New York (a name that sorts earlier), then
// `runlog append` from Tokyo goes to the new run, stamped in its zone.
func TestRunlogAcrossTimeZones(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if _, err := os.Stat("/usr/share/zoneinfo/America/New_York"); err != nil {
		t.Skipf("no tz database: %v", err)
	}
	bin := hBuild(t)
	dir := filepath.Join(t.TempDir(), "logs")
	lavender := func(tz string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--runlog.dir="+dir)...)
		cmd.Env = append(os.Environ(), "TZ="+tz)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("TZ=%s lavender %s: %v\n%s", tz, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	utc := lavender("UTC", "runlog", "new")
	ny := lavender("America/New_York", "runlog", "new")
	if filepath.Base(ny) >= filepath.Base(utc) {
		t.Fatalf("the case proves nothing: %s sorts after %s", ny, utc)
	}
	lavender("Asia/Tokyo", "runlog", "append", "from Tokyo")
	if got := lavender("UTC", "runlog", "path"); got != ny {
		t.Errorf("current run %s, want %s, created last", got, ny)
	}
	data, err := os.ReadFile(ny)
	if err != nil {
		t.Fatal(err)
	}
	f, err := runlog.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	title := f.Header[0]
	offset := title[len(title)-5:]
	if offset != "-0500" && offset != "-0400" {
		t.Fatalf("title %q does not name New York's offset", title)
	}
	// The append's stamp is New York's clock, not Tokyo's or UTC's: within
	// five minutes of it on a 24-hour dial (a sanity bound, not a speed check).
	last := f.AllEntries()[len(f.AllEntries())-1]
	if !strings.HasSuffix(last, " from Tokyo") {
		t.Fatalf("last entry %q", last)
	}
	loc, _ := time.LoadLocation("America/New_York")
	now := time.Now().In(loc)
	stamp, err := time.Parse("15:04:05", last[:8])
	if err != nil {
		t.Fatal(err)
	}
	secs := func(h, m, s int) int { return h*3600 + m*60 + s }
	d := (secs(now.Clock()) - secs(stamp.Clock()) + 86400) % 86400
	if d > 300 && d < 86400-300 {
		t.Errorf("entry %q is not in New York's time (now %s there)", last, now.Format("15:04:05"))
	}
	if strings.Contains(readOrEmpty(utc), "from Tokyo") {
		t.Error("the append went to the older run")
	}
}

func readOrEmpty(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

// TestBridgeLogsAMovedRunLog: the bridge's appends hear about a run log
// moved aside too, not only the exporter's.
func TestBridgeLogsAMovedRunLog(t *testing.T) {
	logDir := filepath.Join(t.TempDir(), "logs")
	bark := newFakeBark(t)
	barkDir := barkConfigDir(t, map[string]string{"phone.bark.env": bark.URL + "/KEY/$0\n"})
	p := hStart(t, nil, hServeArgs(t, barkDir, logDir)...)
	path, err := runlog.CurrentPath(logDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := p.do("POST", "/webhook", hSwapWebhook(0), "", ""); code != 200 {
		t.Fatalf("webhook: %d %s", code, body)
	}
	if !strings.Contains(p.logs.String(), "run log was not a regular file; moved aside") {
		t.Errorf("the move is not logged:\n%s", p.logs)
	}
	if log := hRunLog(t, logDir); !strings.Contains(log, " BARK swap 54% sent ok=1 fail=0\n") {
		t.Errorf("run log after the move:\n%s", log)
	}
}
