package testkit

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBinaries()
	os.Exit(code)
}

// TestStartCommandOneShot: a command that exits by itself gives its
// output and exit status.
func TestStartCommandOneShot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs lavender")
	}
	c := StartCommand(t, "version")
	if err := c.Wait(waitLimit); err != nil {
		t.Fatalf("version: %v\n%s", err, c.Stderr)
	}
	if c.ExitCode() != 0 || !strings.Contains(c.Stdout.String(), "lavender, version") {
		t.Errorf("version: exit %d, stdout %q", c.ExitCode(), c.Stdout)
	}

	bad := StartCommand(t, "runlog", "show", "--no-such-flag")
	var exit *exec.ExitError
	if err := bad.Wait(waitLimit); !errors.As(err, &exit) || bad.ExitCode() == 0 || !strings.Contains(bad.Stderr.String(), "no-such-flag") {
		t.Errorf("unknown flag: %v, exit %d, stderr %q", err, bad.ExitCode(), bad.Stderr)
	}
	if first, again := Binary(t), Binary(t); first != again || !strings.HasPrefix(first, os.TempDir()) {
		t.Errorf("Binary is %s, then %s: want one build in the temp dir", first, again)
	}
}

// TestStartCommandServes: a serving command's address comes from its
// log, its metrics read the fake procfs, and SIGTERM stops it cleanly.
func TestStartCommandServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs lavender")
	}
	procfs := NewProcfs(t, Host{Swap: SwapAt(Swap32GiBinKB, 0.54)})
	c := StartCommandWith(t, Options{Env: []string{"LAVENDER_LOG_FORMAT=json"}},
		"exporter", "--web.listen-address=127.0.0.1:0", "--path.procfs="+procfs.Dir, "--runlog.dir="+filepath.Join(t.TempDir(), "logs"))
	base := c.URL(t)
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("URL %s", base)
	}
	if !strings.HasPrefix(c.Stderr.String(), "{") {
		t.Errorf("Options.Env did not reach the child (log is not JSON): %.200s", c.Stderr)
	}
	ratio := func() float64 { return Scrape(t, nil, base+"/metrics").MustValue(t, "lavender_swap_used_ratio", nil) }
	if got := ratio(); math.Abs(got-0.54) > 1e-6 {
		t.Errorf("lavender_swap_used_ratio = %v, want 0.54", got)
	}
	procfs.SetSwap(SwapAt(Swap32GiBinKB, 0.9))
	WaitFor(t, waitLimit, func() bool { return math.Abs(ratio()-0.9) < 1e-6 }, "the new swap figure on /metrics")

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if c.ExitCode() != 0 || !c.Exited() {
		t.Errorf("exit code %d after SIGTERM", c.ExitCode())
	}
	if err := c.Stop(); err == nil {
		t.Error("a second Stop did not say the process had exited")
	}
}

// TestStartCommandTLSAndSignals: with a web config the URL is https, the
// client of NewTLS and the configured user get in and nobody else does,
// and a SIGKILL shows as exit code -1.
func TestStartCommandTLSAndSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs lavender")
	}
	certs := NewTLS(t)
	webConfig := WriteWebConfig(t, WebConfig{TLS: certs, Users: map[string]string{"prometheus": "scrape me"}})
	c := StartCommand(t, "exporter", "--web.listen-address=127.0.0.1:0", "--web.config.file="+webConfig,
		"--path.procfs="+SwapProcfs(t, 0.1), "--runlog.dir="+filepath.Join(t.TempDir(), "logs"))
	base := c.URL(t)
	if !strings.HasPrefix(base, "https://127.0.0.1:") {
		t.Fatalf("URL %s, want https", base)
	}
	if _, err := FetchMetrics(certs.Client(), base+"/metrics", "prometheus", "scrape me"); err != nil {
		t.Errorf("with credentials: %v", err)
	}
	if _, err := FetchMetrics(certs.Client(), base+"/metrics", "prometheus", "wrong"); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("wrong password: %v, want HTTP 401", err)
	}
	if _, err := FetchMetrics(nil, base+"/metrics", "prometheus", "scrape me"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client without the CA: %v, want a certificate error", err)
	}

	if err := c.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(waitLimit); err == nil || c.ExitCode() != -1 {
		t.Errorf("after SIGKILL: %v, exit code %d; want an error and -1", err, c.ExitCode())
	}
}

// TestAddrFailsWhenTheCommandExits: a command that dies before listening
// fails Addr at once, with its output, instead of at the deadline.
func TestAddrFailsWhenTheCommandExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs lavender")
	}
	c := StartCommand(t, "exporter", "--web.listen-address=256.0.0.1:0", "--path.procfs="+SwapProcfs(t, 0.1), "--runlog.dir="+t.TempDir())
	// "exited", not "gave up after": it did not wait out the deadline.
	msg := fails(t, func(tb testing.TB) { c.Addr(tb) })
	if !strings.Contains(msg, "exited") || !strings.Contains(msg, "256.0.0.1") {
		t.Errorf("Addr failed with %q", msg)
	}
}

// cleanupRecorder is a testing.TB that keeps Errorf and Cleanup to itself.
type cleanupRecorder struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (r *cleanupRecorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *cleanupRecorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *cleanupRecorder) Failed() bool     { return len(r.errors) > 0 }
func (r *cleanupRecorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestCleanupChecksTheGracefulExit: by default the end of the test sends
// SIGTERM and wants exit status 0; KillAtEnd kills without a check.
func TestCleanupChecksTheGracefulExit(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	// Exits 3 on SIGTERM, as a command with a broken shutdown would.
	script := `trap 'exit 3' TERM; echo started; while :; do sleep 0.05; done`
	for _, killAtEnd := range []bool{false, true} {
		r := &cleanupRecorder{TB: t}
		c := StartProgram(r, Options{KillAtEnd: killAtEnd}, sh, "-c", script)
		WaitFor(t, waitLimit, func() bool { return strings.Contains(c.Stdout.String(), "started") }, "the script to start")
		r.runCleanups()
		if !c.Exited() {
			t.Fatalf("KillAtEnd=%v: still running after cleanup", killAtEnd)
		}
		got := strings.Join(r.errors, "\n")
		switch {
		case !killAtEnd && (c.ExitCode() != 3 || !strings.Contains(got, "sh -c") || !strings.Contains(got, "exit after SIGTERM: exit status 3")):
			t.Errorf("SIGTERM at cleanup: exit %d, errors %q", c.ExitCode(), got)
		case killAtEnd && (c.ExitCode() != -1 || got != ""):
			t.Errorf("KillAtEnd: exit %d, errors %q", c.ExitCode(), got)
		}
	}
}

func TestGivenBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "lavender")
	plain := filepath.Join(dir, "notes.txt")
	for path, mode := range map[string]os.FileMode{exe: 0o755, plain: 0o644} {
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	if got, err := givenBinary("lavender"); err != nil || got != exe {
		t.Errorf(`givenBinary("lavender") in its dir = %q, %v; want %q`, got, err, exe)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing"): "no such file",
		dir:                           "not a regular file",
		plain:                         "not executable",
	} {
		if _, err := givenBinary(path); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), BinaryEnv+"=") {
			t.Errorf("givenBinary(%s) = %v, want an error naming %s and saying %q", path, err, BinaryEnv, want)
		}
	}
}
