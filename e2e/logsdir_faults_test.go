package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// mountTmpfs mounts a tmpfs of size bytes at a fresh dir, or skips the
// test when this machine does not allow it (not root, or no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size int) string {
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

// fillUp writes to dir/filler until the file system is full.
func fillUp(t *testing.T, dir string) {
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

// remount runs mount -o remount,<opts> on dir.
func remount(t *testing.T, opts, dir string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+opts, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -o remount,%s %s: %v %s", opts, dir, err, out)
	}
}

// TestLogsDirFaults: with the logs dir full, read-only or replaced by a
// file, pushes still go out and are answered 200, heartbeats still work,
// every lost write is counted, the failure is logged once (not once per
// write) and nothing crashes; once the dir recovers, records resume.
func TestLogsDirFaults(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	for _, tc := range []struct {
		name           string
		mount          bool
		break_, repair func(t *testing.T, mnt, logDir string)
	}{
		{
			name: "full", mount: true,
			break_: func(t *testing.T, mnt, _ string) { fillUp(t, mnt) },
			repair: func(t *testing.T, mnt, _ string) { os.Remove(filepath.Join(mnt, "filler")) },
		},
		{
			name: "read-only", mount: true,
			break_: func(t *testing.T, mnt, _ string) { remount(t, "ro", mnt) },
			repair: func(t *testing.T, mnt, _ string) { remount(t, "rw", mnt) },
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
				mnt = mountTmpfs(t, 256<<10)
			}
			logDir := filepath.Join(mnt, "logs")
			bark := barktest.New(t)
			barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.Template(barktest.Key) + "\n"})
			// 40 pushes in a minute: storm control off, so each is a push.
			serve := testkit.StartCommand(t, append(testkit.QuietServeArgs(t, barkDir, logDir), "--bark.max-per-minute=0")...)
			base := serve.URL(t)
			testkit.WaitReady(t, nil, base, "", "")
			post := func(path string, body []byte) (int, string) {
				return testkit.MustDo(t, nil, "POST", base+path, body, "", "")
			}
			if code, body := post("/api/v1/heartbeat", []byte(`{"phase":"Train","event":"start"}`)); code != 200 {
				t.Fatalf("heartbeat before the fault: %d %s", code, body)
			}
			runlogtest.Text(t, logDir)

			tc.break_(t, mnt, logDir)
			// Enough pushes that the log must compact (a new file) at least
			// once: on a full tmpfs an append inside the file's last page
			// still succeeds, a compaction cannot.
			const n = 40
			for i := range n {
				code, body := post("/webhook", testkit.SwapAlertWebhook(i))
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
				if code, body := post("/api/v1/heartbeat", []byte(hb)); code != 200 {
					t.Errorf("heartbeat %s with the logs dir %s: %d %s", hb, tc.name, code, body)
				}
			}
			if got := bark.Count(); got != n {
				t.Errorf("Bark got %d pushes, want %d", got, n)
			}
			m := testkit.Scrape(t, nil, base+"/metrics")
			barkErrs := m.MustValue(t, "lavender_runlog_write_errors_total", testkit.Labels{"writer": "bark"})
			expErrs := m.MustValue(t, "lavender_runlog_write_errors_total", testkit.Labels{"writer": "exporter"})
			t.Logf("logs dir %s: %v bark and %v exporter write errors counted", tc.name, barkErrs, expErrs)
			if barkErrs < 1 || expErrs < 1 {
				t.Errorf("write errors not counted: bark %v, exporter %v", barkErrs, expErrs)
			}
			// Wait for the line to reach the buffer; the count below is the check.
			serve.Logged("run log append failed")
			logs := serve.Stderr.String()
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
			if code, body := post("/webhook", testkit.SwapAlertWebhook(n)); code != 200 {
				t.Fatalf("webhook after repair: %d %q", code, body)
			}
			if code, body := post("/api/v1/heartbeat", []byte(`{"phase":"After","event":"start"}`)); code != 200 {
				t.Fatalf("heartbeat after repair: %d %q", code, body)
			}
			log := runlogtest.Text(t, logDir)
			if !strings.Contains(log, " BARK swap 54% sent ok=1 fail=0\n") || !strings.Contains(log, " START After\n") {
				t.Errorf("records did not resume after repair:\n%s", log)
			}
		})
	}
}
