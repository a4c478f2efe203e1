package deploy

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestKernelLogTakesCAPSYSLOG runs the real binary as an unprivileged user,
// as the systemd unit's DynamicUser does, with and without the CAP_SYSLOG
// the unit grants (AmbientCapabilities=CAP_SYSLOG): with it lavender reads
// /dev/kmsg; without it lavender says it is blind, in the metric and on
// the status page. Needs root (to drop to nobody), setpriv and a kernel
// with dmesg_restrict, as the hosts the unit is for have.
func TestKernelLogTakesCAPSYSLOG(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run lavender as another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not found")
	}
	if restrict, err := os.ReadFile("/proc/sys/kernel/dmesg_restrict"); err != nil || strings.TrimSpace(string(restrict)) != "1" {
		t.Skipf("kernel.dmesg_restrict is not 1 here (%q, %v): anyone may read the log", restrict, err)
	}
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		t.Skipf("no /dev/kmsg: %v", err)
	}
	// A copy of the binary, and a logs dir, that nobody can use.
	dir, err := os.MkdirTemp("", "lavender-caps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "lavender")
	copyFile(t, testkit.Binary(t), bin)
	for _, p := range []string{dir, bin} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		caps     []string
		readable string
	}{
		{"with CAP_SYSLOG", []string{"--inh-caps=+syslog", "--ambient-caps=+syslog"}, "1"},
		{"without", nil, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.Mkdir(logs, 0o777); err != nil {
				t.Fatal(err)
			}
			os.Chmod(logs, 0o777)
			args := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups"}, tc.caps...)
			args = append(args, bin, "exporter", "--web.listen-address=127.0.0.1:0", "--runlog.dir="+logs, "--path.procfs=/proc", "--path.kmsg=/dev/kmsg")
			c := testkit.StartProgram(t, testkit.Options{}, setpriv, args...)
			base := c.URL(t)
			want := "lavender_kernel_log_readable " + tc.readable + "\n"
			testkit.WaitFor(t, 20*time.Second, func() bool {
				_, page, err := testkit.Do(nil, "GET", base+"/metrics", nil, "", "")
				return err == nil && strings.Contains(page, want)
			}, want)
			_, page := testkit.MustDo(t, nil, "GET", base+"/", nil, "", "")
			blind := strings.Contains(page, `id="kernel-log"`)
			if blind != (tc.readable == "0") || (blind && !strings.Contains(page, "needs root or CAP_SYSLOG")) {
				t.Errorf("status page (blind=%v) does not match the log being readable=%s", blind, tc.readable)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
