package e2e

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

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

// TestServeWithOddFilesInLogsDir runs the real binary with a FIFO or a
// symlink to /dev/zero where it reads: it must answer, stop on SIGTERM and
// move the odd file aside, rather than hang or fill memory.
func TestServeWithOddFilesInLogsDir(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
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
			// A serve that takes connections and never answers (as one
			// blocked on a FIFO did) fails WaitReady instead of hanging.
			serve := testkit.StartCommand(t, "serve", "--web.listen-address=127.0.0.1:0", "--path.procfs="+testkit.SwapProcfs(t, 0.10),
				"--watchdog.interval=0", "--runlog.dir="+logDir, "--bark.config-dir="+t.TempDir(), "--run.resume")
			base := serve.URL(t)
			testkit.WaitReady(t, &http.Client{Timeout: 5 * time.Second}, base, "", "")
			client := &http.Client{Timeout: 30 * time.Second}
			for _, path := range []string{"/", "/api/v1/status", "/api/v1/phases"} {
				resp, err := client.Get(base + path)
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 2<<20))
				resp.Body.Close()
				if resp.StatusCode != 200 || len(body) > 1<<20 {
					t.Errorf("GET %s: %d, %d bytes", path, resp.StatusCode, len(body))
				}
			}
			resp, err := client.Post(base+"/api/v1/heartbeat", "application/json", strings.NewReader(`{"phase":"Train","event":"start"}`))
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("heartbeat: %v %v", resp, err)
			}
			if resp != nil {
				resp.Body.Close()
			}
			if err := serve.Stop(); err != nil {
				t.Errorf("exit after SIGTERM: %v\n%s", err, serve.Stderr)
			}
			if st, err := os.Lstat(odd + ".damaged"); err != nil || st.Mode().IsRegular() {
				t.Errorf("the odd file was not moved aside: %v %v", st, err)
			}
			if !strings.Contains(serve.Stderr.String(), "damaged") && !strings.Contains(serve.Stderr.String(), "not a regular file") {
				t.Errorf("nothing logged about the odd file:\n%s", serve.Stderr)
			}
			if st, err := os.Lstat(l.Path()); err != nil || !st.Mode().IsRegular() {
				t.Fatalf("the run log is not a regular file after serve: %v %v", st, err)
			}
			got := runlogtest.EntriesOf(t, runlogtest.Text(t, logDir))
			if got[len(got)-1] != "RUN stop" {
				t.Errorf("run log after the repair: %q", got)
			}
		})
	}
}

// TestStatusShowsTheTailOfAHugeRunLog: a 50 MB run log is shown as its
// last --runlog.max-bytes on / and /api/v1/status, and the next append
// brings the file back under the cap.
func TestStatusShowsTheTailOfAHugeRunLog(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
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

	serve := testkit.StartCommand(t, "exporter", "--web.listen-address=127.0.0.1:0", "--path.procfs="+testkit.SwapProcfs(t, 0.10), "--runlog.dir="+logDir)
	base := serve.URL(t)
	testkit.WaitReady(t, nil, base, "", "")
	code, body := testkit.MustDo(t, nil, "GET", base+"/api/v1/status", nil, "", "")
	var status struct {
		RunLog string `json:"run_log"`
	}
	if err := json.Unmarshal([]byte(body), &status); code != 200 || err != nil {
		t.Fatalf("GET /api/v1/status: %d %v", code, err)
	}
	if len(status.RunLog) > runlog.DefaultMaxBytes || !strings.HasSuffix(status.RunLog, "00:00:01 the newest line\n") {
		t.Errorf("run_log is %d bytes ending %q, want at most %d ending in the newest line", len(status.RunLog), status.RunLog[max(0, len(status.RunLog)-30):], runlog.DefaultMaxBytes)
	}
	if code, page := testkit.MustDo(t, nil, "GET", base+"/", nil, "", ""); code != 200 || len(page) > 256<<10 || !strings.Contains(page, "the newest line") {
		t.Errorf("GET /: %d, %d bytes", code, len(page))
	}
	if code, body := testkit.MustDo(t, nil, "POST", base+"/api/v1/heartbeat", []byte(`{"phase":"Train","event":"start"}`), "", ""); code != 200 {
		t.Fatalf("heartbeat: %d %s", code, body)
	}
	log := runlogtest.Text(t, logDir) // checks the cap and that it parses
	if !strings.Contains(log, "the newest line") || !strings.HasSuffix(log, " START Train\n") {
		t.Errorf("repaired run log:\n%s", log)
	}
}

// TestServeStartsWhenLogsDirIsAFile: serve does not exit when its logs
// dir cannot be listed; it counts the failure and recovers once the dir
// is usable.
func TestServeStartsWhenLogsDirIsAFile(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	logDir := filepath.Join(t.TempDir(), "logs")
	if err := os.WriteFile(logDir, []byte("not a dir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serve := testkit.StartCommand(t, testkit.QuietServeArgs(t, t.TempDir(), logDir)...)
	base := serve.URL(t)
	testkit.WaitReady(t, nil, base, "", "")
	if n := testkit.Scrape(t, nil, base+"/metrics").MustValue(t, "lavender_runlog_write_errors_total", testkit.Labels{"writer": "exporter"}); n < 1 {
		t.Errorf("write errors counted: %v, want at least 1", n)
	}
	if !serve.Logged("not a directory") {
		t.Errorf("the problem is not logged:\n%s", serve.Stderr)
	}
	if code, body := testkit.MustDo(t, nil, "POST", base+"/api/v1/heartbeat", []byte(`{"phase":"Train","event":"start"}`), "", ""); code != 200 {
		t.Fatalf("heartbeat while the dir is a file: %d %s", code, body)
	}
	os.Remove(logDir)
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, body := testkit.MustDo(t, nil, "POST", base+"/api/v1/heartbeat", []byte(`{"phase":"Eval","event":"start"}`), "", ""); code != 200 {
		t.Fatalf("heartbeat once the dir is usable: %d %s", code, body)
	}
	if log := runlogtest.Text(t, logDir); !strings.HasSuffix(log, " START Eval\n") {
		t.Errorf("records did not resume:\n%s", log)
	}
}

// TestRunlogAcrossTimeZones runs the binary as a user would: serve's run
// made in UTC, `runlog new` in New York (a name that sorts earlier), then
// `runlog append` from Tokyo goes to the new run, stamped in its zone.
func TestRunlogAcrossTimeZones(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if _, err := os.Stat("/usr/share/zoneinfo/America/New_York"); err != nil {
		t.Skipf("no tz database: %v", err)
	}
	bin := testkit.Binary(t)
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
	if data, _ := os.ReadFile(utc); strings.Contains(string(data), "from Tokyo") {
		t.Error("the append went to the older run")
	}
}

// TestBridgeLogsAMovedRunLog: the bridge's appends hear about a run log
// moved aside too, not only the exporter's.
func TestBridgeLogsAMovedRunLog(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	logDir := filepath.Join(t.TempDir(), "logs")
	bark := barktest.New(t)
	barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.URL + "/KEY/$0\n"})
	serve := testkit.StartCommand(t, testkit.QuietServeArgs(t, barkDir, logDir)...)
	base := serve.URL(t)
	testkit.WaitReady(t, nil, base, "", "")
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
	if code, body := testkit.MustDo(t, nil, "POST", base+"/webhook", testkit.SwapAlertWebhook(0), "", ""); code != 200 {
		t.Fatalf("webhook: %d %s", code, body)
	}
	if !serve.Logged("run log was not a regular file; moved aside") {
		t.Errorf("the move is not logged:\n%s", serve.Stderr)
	}
	if log := runlogtest.Text(t, logDir); !strings.Contains(log, " BARK swap 54% sent ok=1 fail=0\n") {
		t.Errorf("run log after the move:\n%s", log)
	}
}
