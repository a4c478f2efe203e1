package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestServeWithOddProcfsFiles runs the real binary with meminfo, vmstat or
// pressure/memory replaced by a FIFO or a symlink to /dev/zero, and with a
// pressure file that says NaN or has two some lines. Before, a FIFO hung
// serve for good (never ready, /metrics hanging, SIGTERM ignored) and
// /dev/zero grew it past a gigabyte; NaN reached /api/v1/status, which
// answered 200 with an empty body. Now serve becomes ready, /metrics counts
// the file's read errors, the status answers, peak RSS stays small, and
// one SIGTERM stops it with status 0.
func TestServeWithOddProcfsFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	fifo := func(p string) error { return syscall.Mkfifo(p, 0o644) }
	zero := func(p string) error { return os.Symlink("/dev/zero", p) }
	text := func(s string) func(string) error {
		return func(p string) error { return os.WriteFile(p, []byte(s), 0o644) }
	}
	const full = "full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"
	for _, tc := range []struct {
		name, file, source string
		make               func(path string) error
	}{
		{"meminfo is a FIFO", "meminfo", "meminfo", fifo},
		{"meminfo is /dev/zero", "meminfo", "meminfo", zero},
		{"vmstat is a FIFO", "vmstat", "vmstat", fifo},
		{"vmstat is /dev/zero", "vmstat", "vmstat", zero},
		{"pressure is a FIFO", "pressure/memory", "pressure/memory", fifo},
		{"pressure is /dev/zero", "pressure/memory", "pressure/memory", zero},
		{"pressure says NaN", "pressure/memory", "pressure/memory", text("some avg10=NaN avg60=0.00 avg300=0.00 total=5\n" + full)},
		{"pressure has two some lines", "pressure/memory", "pressure/memory", text("some avg10=1.00 avg60=0.00 avg300=0.00 total=5\n" + full + "some avg10=2.00 avg60=0.00 avg300=0.00 total=6\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each its own serve process and procfs; most of it is waiting for polls
			procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.1), PSI: &testkit.PSI{}})
			path := filepath.Join(procfs.Dir, tc.file)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(path); err != nil {
				t.Fatal(err)
			}
			serve := testkit.StartCommand(t, "serve", "--web.listen-address=127.0.0.1:0", "--path.procfs="+procfs.Dir,
				"--watchdog.interval=1s", "--runlog.dir="+filepath.Join(t.TempDir(), "logs"), "--bark.config-dir="+t.TempDir())
			base := serve.URL(t)
			client := &http.Client{Timeout: 10 * time.Second}
			testkit.WaitReady(t, client, base, "", "")
			get := func(p string) (int, string) {
				t.Helper()
				resp, err := client.Get(base + p)
				if err != nil {
					t.Fatalf("GET %s: %v", p, err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
				return resp.StatusCode, string(body)
			}
			// Two polls after ready, so the status holds samples.
			time.Sleep(2500 * time.Millisecond)
			code, metrics := get("/metrics")
			m := regexp.MustCompile(`lavender_swap_read_errors_total\{file="` + regexp.QuoteMeta(tc.source) + `"\} (\d+)`).FindStringSubmatch(metrics)
			if code != 200 || m == nil || m[1] == "0" {
				t.Errorf("/metrics %d: want lavender_swap_read_errors_total{file=%q} counting the read errors; got %v", code, tc.source, m)
			}
			for _, p := range []string{"/api/v1/status", "/"} {
				code, body := get(p)
				if code != 200 || len(body) == 0 || strings.Contains(body, "NaN") {
					t.Errorf("GET %s: %d, %d bytes, NaN: %v", p, code, len(body), strings.Contains(body, "NaN"))
				}
			}
			// Unbounded, /dev/zero grew serve past 880 MiB in 13 s. The bound
			// sits far below that and well above what a race-detector build
			// of serve uses (several times a plain build's 16 MiB).
			if hwm := peakRSSKiB(t, serve.Pid()); hwm > 256<<10 {
				t.Errorf("peak RSS %d KiB, want under 256 MiB", hwm)
			} else {
				t.Logf("peak RSS %d KiB", hwm)
			}
			if err := serve.Stop(); err != nil {
				t.Errorf("one SIGTERM: %v\n%s", err, serve.Stderr)
			}
			if !strings.Contains(serve.Stderr.String(), tc.file) {
				t.Errorf("nothing logged about %s:\n%s", tc.file, serve.Stderr)
			}
		})
	}
}

// peakRSSKiB reads VmHWM of pid: the most memory it held at once.
func peakRSSKiB(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no VmHWM")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
