package e2e

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
)

// initLinesAfter counts the GODEBUG=inittrace lines after the one of pkg,
// or -1 if pkg's line is not there.
func initLinesAfter(trace, pkg string) int {
	lines := strings.Split(trace, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "init "+pkg+" @") {
			n := 0
			for _, rest := range lines[i+1:] {
				if strings.HasPrefix(rest, "init ") {
					n++
				}
			}
			return n
		}
	}
	return -1
}

// TestSIGHUPDuringStart runs the real binary and sends SIGHUP
// every 200 µs from the moment os/signal is initialised (the first moment
// any Go program can register for a signal) until serve is ready. Before
// the fix, serve exited with status 129 in most tries: its reload handler
// came only after kong, the bridge and the listeners. A death is held
// against lavender only if the trace shows a package initialised after
// os/signal, since before that no Go code can take the signal.
func TestSIGHUPDuringStart(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// A SIGHUP that lands between os/signal's init and the hangup
	// package's, right after it, kills any Go program and is not held
	// against lavender; on a loaded machine that is often, so inconclusive
	// tries are made up for, up to maxTries in all.
	const tries, maxTries = 8, 32
	conclusive, try := 0, 0
	defer func() {
		if !t.Failed() && conclusive < tries/2 {
			t.Errorf("only %d of %d tries got past os/signal's init: nothing tested", conclusive, try)
		}
	}()
	for ; conclusive < tries && try < maxTries; try++ {
		procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.10)})
		// The address is known before the start: the SIGHUPs begin before
		// serve could log where it listens.
		base := "http://" + testkit.FreeAddrs(t, 1)[0]
		serve := testkit.StartCommandWith(t, testkit.Options{Env: []string{"GODEBUG=inittrace=1"}, KillAtEnd: true},
			"serve", "--web.listen-address="+strings.TrimPrefix(base, "http://"), "--path.procfs="+procfs.Dir,
			"--runlog.dir="+t.TempDir(), "--bark.config-dir="+t.TempDir(), "--watchdog.interval=50ms")
		stderr := serve.Stderr
		ready200 := func() bool {
			code, _, err := testkit.Do(nil, "GET", base+"/-/ready", nil, "", "")
			return err == nil && code == 200
		}

		// Wait for os/signal's init, then send SIGHUPs until ready.
		deadline := time.Now().Add(30 * time.Second)
		var waitErr error
		done, ready, sent := false, false, 0
		for !done && time.Now().Before(deadline) {
			if serve.Exited() {
				waitErr, done = serve.Wait(time.Second), true // it has exited: Wait returns at once
				continue
			}
			if initLinesAfter(stderr.String(), "os/signal") < 0 {
				time.Sleep(50 * time.Microsecond)
				continue
			}
			_ = serve.Signal(syscall.SIGHUP)
			sent++
			time.Sleep(200 * time.Microsecond)
			if sent%25 == 0 && ready200() {
				ready = true
				break
			}
		}
		if !done && !ready {
			t.Fatalf("try %d: serve neither ready nor exited within 30s", try)
		}
		if done {
			var exitErr *exec.ExitError
			if errors.As(waitErr, &exitErr) {
				if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGHUP &&
					initLinesAfter(stderr.String(), "os/signal") == 0 {
					t.Logf("try %d: SIGHUP came before any package after os/signal was initialised; not held against lavender", try)
					continue
				}
			}
			t.Fatalf("try %d: serve exited during start after %d SIGHUPs: %v\n%s", try, sent, waitErr, lastLines(stderr.String(), 20))
		}
		// Ready: one more SIGHUP is a reload, then SIGTERM ends it with 0.
		_ = serve.Signal(syscall.SIGHUP)
		if !ready200() {
			t.Errorf("try %d: not ready after a SIGHUP", try)
		}
		if err := serve.Stop(); err != nil {
			t.Fatalf("try %d: exit after SIGTERM: %v\n%s", try, err, lastLines(stderr.String(), 20))
		}
		conclusive++
		t.Logf("try %d: %d SIGHUPs during start, serve ready and stopped cleanly", try, sent)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestServeSIGTERM runs the real binary: it has the --runtime.* defaults
// when the environment sets nothing, SIGTERM ends it with status 0, and
// the run log ends with RUN stop.
func TestServeSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// The defaults apply only when the environment sets nothing.
	for _, name := range []string{"GOMAXPROCS", "GOGC"} {
		if v, ok := os.LookupEnv(name); ok {
			os.Unsetenv(name)
			t.Cleanup(func() { os.Setenv(name, v) })
		}
	}
	logDir := t.TempDir()
	serve := testkit.StartCommand(t, "serve", "--web.listen-address=127.0.0.1:0", "--path.procfs="+testkit.SwapProcfs(t, 0.10),
		"--runlog.dir="+logDir, "--bark.config-dir="+t.TempDir(), "--watchdog.interval=50ms")
	base := serve.URL(t)
	testkit.WaitReady(t, nil, base, "", "")
	m := testkit.Scrape(t, nil, base+"/metrics")
	for name, want := range map[string]float64{"go_sched_gomaxprocs_threads": 1, "go_gc_gogc_percent": 75} {
		if got := m.MustValue(t, name, nil); got != want {
			t.Errorf("%s = %v, want %v (the --runtime.* defaults)", name, got, want)
		}
	}
	if err := serve.Stop(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	path, err := runlog.CurrentPath(logDir)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(data), " RUN stop\n") {
		t.Errorf("run log does not end with RUN stop:\n%s", data)
	}
}
