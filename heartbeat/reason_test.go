package heartbeat

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
)

const oomTraceback = `Traceback (most recent call last):
  File "/srv/train.py", line 41, in <module>
    main()
  File "/srv/train.py", line 37, in main
    loss = model(batch).loss
           ^^^^^^^^^^^^
RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB
`

const chainedTraceback = `Traceback (most recent call last):
  File "save.py", line 3, in save
    f.write(blob)
OSError: [Errno 28] No space left on device

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "train.py", line 9, in <module>
    save()
RuntimeError: checkpoint save failed
wandb: Waiting for W&B process to finish... (failed 1).
`

// torchrunBlock is the end of a failed torchrun job, as
// torch.distributed.elastic formats it, after the launcher's own
// ChildFailedError traceback.
func torchrunBlock(errorFile, traceback string) string {
	return `Traceback (most recent call last):
  File "/usr/bin/torchrun", line 33, in <module>
    sys.exit(load_entry_point('torch', 'console_scripts', 'torchrun')())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_03:00:00
  host      : gpu-1
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 4242)
  error_file: ` + errorFile + `
  traceback : ` + traceback + `
============================================================
`
}

// fromBorder drops the launcher's own traceback before the block.
func fromBorder(s string) string { return s[strings.Index(s, "====="):] }

func TestStderrReason(t *testing.T) {
	for _, tc := range []struct {
		name, stderr, want string
		traceback          bool
	}{
		{"python traceback", "epoch 1\n" + oomTraceback, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", true},
		{"chained: the last block, not what follows it", chainedTraceback, "RuntimeError: checkpoint save failed", true},
		{"tqdm bar, then the traceback", "  0%|          | 0/100\r 50%|#####     | 50/100\r" + oomTraceback, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", true},
		{"torchrun with the worker's traceback", torchrunBlock("/tmp/torchelastic_x/error.json", `Traceback (most recent call last):
    File "/srv/train.py", line 37, in main
      loss = model(batch).loss
  RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB`), "rank 1: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", true},
		{"torchrun, a worker killed", torchrunBlock("<N/A>", "Signal 9 (SIGKILL) received by PID 4242"), "rank 1: Signal 9 (SIGKILL) received by PID 4242", true},
		{"torchrun without an error file: the worker's printed traceback", "[rank1]: " + "x\n" + oomTraceback + torchrunBlock("<N/A>", "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"),
			"rank 1: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", true},
		{"torchrun with nothing more", fromBorder(torchrunBlock("<N/A>", "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")),
			"rank 1: exit code 1", true},
		{"last non-empty line", "loading\nerror: config.yaml: no such file\n\n  \n", "error: config.yaml: no such file", false},
		{"colours dropped", "\x1b[31mFATAL\x1b[0m: bad flag --lr\n", "FATAL: bad flag --lr", false},
		{"nothing", "", "", false},
	} {
		got, tb := stderrReason([]byte(tc.stderr), false)
		if got != tc.want || tb != tc.traceback {
			t.Errorf("%s: %q (traceback %v), want %q (%v)", tc.name, got, tb, tc.want, tc.traceback)
		}
	}
}

func TestFailureReason(t *testing.T) {
	for _, tc := range []struct {
		forwarded, killed string
		code              int
		stderr, want      string
	}{
		{"SIGTERM", "", 0, "", "interrupted by SIGTERM"},
		{"SIGINT", "SIGINT", 130, oomTraceback, "interrupted by SIGINT"},
		{"", "SIGKILL", 137, "", "killed by SIGKILL"},
		{"", "", 137, "", "killed by SIGKILL (exit code 137)"},
		{"", "", 1, oomTraceback, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"},
		{"", "", 2, "usage: train.py [-h] --lr LR\n", "exit code 2: usage: train.py [-h] --lr LR"},
		{"", "", 3, "", "exit code 3"},
	} {
		if got := failureReason(tc.forwarded, tc.killed, tc.code, []byte(tc.stderr), false); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc, got, tc.want)
		}
	}
}

// The tail keeps the newest bytes, and says when it dropped some.
func TestTailBuffer(t *testing.T) {
	var tb tailBuffer
	tb.Write([]byte(strings.Repeat("a", maxTailBytes-1)))
	tb.Write([]byte("bc"))
	data, cut := tb.Bytes()
	if len(data) != maxTailBytes || !strings.HasSuffix(string(data), "abc") || !cut {
		t.Errorf("tail of %d bytes ending %q, cut %v", len(data), data[len(data)-3:], cut)
	}
}

// runCauseChild holds the wrapped commands of the cause tests:
//   - "stderr FILE CODE": writes FILE's bytes to stderr, exits CODE;
//   - "bar": writes a tqdm-like bar piece (no newline) to stderr, waits for
//     stdin to close, then writes a traceback and exits 1;
//   - "lightning": says "ready", and exits 0 on SIGTERM, as Lightning does;
//   - "selfkill": says "ready" and kills itself with SIGKILL;
//   - "env": prints LAVENDER_URL and LAVENDER_PHASE.
func runCauseChild(verb, arg string) int {
	switch verb {
	case "stderr":
		file, code, _ := strings.Cut(arg, " ")
		data, err := os.ReadFile(file)
		if err != nil {
			return 98
		}
		os.Stderr.Write(data)
		var n int
		fmt.Sscan(code, &n)
		return n
	case "bar":
		fmt.Fprint(os.Stderr, " 50%|#####     | 50/100\r")
		_, _ = io.Copy(io.Discard, os.Stdin)
		fmt.Fprint(os.Stderr, oomTraceback)
		return 1
	case "lightning":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		return 0
	case "selfkill":
		fmt.Println("ready")
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
		return 0
	case "env":
		fmt.Printf("url=%s phase=%s\n", os.Getenv(EnvURL), os.Getenv(EnvPhase))
		return 0
	}
	return 99
}

// runToEnd runs the wrapper over mode with the exporter of env, and
// returns the exit code and the phase as the exporter has it.
func runToEnd(t *testing.T, env *testEnv, w *Wrapper, mode string) (int, phaseapi.Phase) {
	t.Helper()
	r := waitResult(t, startWrapper(t, w, mode))
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	p, ok := env.phase(w.Phase)
	if !ok {
		t.Fatalf("no phase %q", w.Phase)
	}
	return r.code, p
}

// A real command's failure reaches the exporter with its cause: the
// traceback's last line, its killing signal, a signal the wrapper
// forwarded; stderr passes through byte for byte.
func TestWrapperSendsTheReason(t *testing.T) {
	env := newTestEnv(t)
	client, err := NewClient(env.server().URL)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("traceback", func(t *testing.T) {
		file := t.TempDir() + "/stderr"
		raw := "  0%|          | 0/100\r 50%|#####     | 50/100\r\x1b[31m" + oomTraceback
		if err := os.WriteFile(file, []byte(raw), 0o644); err != nil {
			t.Fatal(err)
		}
		var stderr testkit.SyncBuffer
		w := &Wrapper{Client: client, Phase: "Finetune", Every: time.Hour, Stderr: &stderr}
		code, p := runToEnd(t, env, w, "stderr "+file+" 1")
		if code != 1 || p.Status != phaseapi.StatusFailed || p.Reason != "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB" {
			t.Errorf("exit %d, phase %s %q", code, p.Status, p.Reason)
		}
		if stderr.String() != raw {
			t.Errorf("stderr passed through as %q, want the bytes as written", stderr.String())
		}
		if entries := env.entries(); entries[len(entries)-1] != "END   Finetune 0s failed: RuntimeError" {
			t.Errorf("END line %q", entries[len(entries)-1])
		}
	})

	t.Run("killed", func(t *testing.T) {
		stdoutR, stdoutW := io.Pipe()
		go io.Copy(io.Discard, stdoutR)
		w := &Wrapper{Client: client, Phase: "Killed", Every: time.Hour, Stdout: stdoutW}
		code, p := runToEnd(t, env, w, "selfkill")
		stdoutW.Close()
		if code != 128+int(syscall.SIGKILL) || p.Status != phaseapi.StatusFailed || p.Reason != "killed by SIGKILL" {
			t.Errorf("exit %d, phase %s %q", code, p.Status, p.Reason)
		}
	})

	t.Run("interrupted, exit 0", func(t *testing.T) {
		sigc := make(chan os.Signal, 1)
		w := &Wrapper{Client: client, Phase: "Lightning", Every: time.Hour, Signals: sigc}
		done := startReady(t, w, "lightning")
		sigc <- syscall.SIGTERM
		r := waitResult(t, done)
		p, _ := env.phase("Lightning")
		if r.code != 0 || p.Status != phaseapi.StatusFailed || p.Reason != "interrupted by SIGTERM" {
			t.Errorf("exit %d, phase %s %q; want exit 0 and failed: interrupted by SIGTERM", r.code, p.Status, p.Reason)
		}
	})

	t.Run("pid and dirs", func(t *testing.T) {
		w := &Wrapper{Client: client, Phase: "Env", Every: time.Hour, Stdout: io.Discard}
		_, p := runToEnd(t, env, w, "env")
		wd, _ := os.Getwd()
		if p.PID <= 0 || p.PID == int64(os.Getpid()) || len(p.Dirs) != 1 || p.Dirs[0] != wd {
			t.Errorf("process %+v dirs %q; want the child's pid and the working directory", p.Process, p.Dirs)
		}
	})
}

// A bar piece without a newline reaches the wrapper's stderr while the
// command still runs: the pass-through is not line-buffered.
func TestWrapperStderrWithoutDelay(t *testing.T) {
	env := newTestEnv(t)
	client, _ := NewClient(env.server().URL)
	stdinR, stdinW := io.Pipe()
	var stderr testkit.SyncBuffer
	w := &Wrapper{Client: client, Phase: "Bar", Every: time.Hour, Stdin: stdinR, Stderr: &stderr}
	done := startWrapper(t, w, "bar")
	testkit.WaitFor(t, 20*time.Second, func() bool { return stderr.String() == " 50%|#####     | 50/100\r" }, "the bar piece on stderr while the command runs")
	stdinW.Close()
	if r := waitResult(t, done); r.code != 1 {
		t.Fatalf("exit %d", r.code)
	}
	if p, _ := env.phase("Bar"); p.Reason != "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB" {
		t.Errorf("reason %q", p.Reason)
	}
}

// The command learns where to report and as which phase.
func TestWrapperEnvironment(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	client, _ := NewClient(srv.URL + "/")
	t.Setenv(EnvPhase, "outer")
	var stdout testkit.SyncBuffer
	w := &Wrapper{Client: client, Phase: " Finetune ", Every: time.Hour, Stdout: &stdout}
	if r := waitResult(t, startWrapper(t, w, "env")); r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	if want := "url=" + srv.URL + " phase=Finetune\n"; stdout.String() != want {
		t.Errorf("the command saw %q, want %q", stdout.String(), want)
	}
}
