package statelock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestTakeIsExclusive: a held lock is ErrHeld to a second taker (flock
// locks belong to an open file, so a second open in one process conflicts
// as another process's would), and free again once closed.
func TestTakeIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "state.lock") // the dir is made
	first, err := Take(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Take(path); !errors.Is(err, ErrHeld) {
		t.Fatalf("second Take: %v, want ErrHeld", err)
	}
	first.Close()
	again, err := Take(path)
	if err != nil {
		t.Fatalf("Take after the holder closed it: %v", err)
	}
	again.Close()
}

// TestTakeHeldByAnotherProcess: flock(1) holds the lock in another process.
func TestTakeHeldByAnotherProcess(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("no flock(1) here")
	}
	path := filepath.Join(t.TempDir(), "state.lock")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(flock, "--exclusive", path, "sh", "-c", "echo held; read _")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	buf := make([]byte, 5)
	if n, err := stdout.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "held") {
		t.Fatalf("flock(1) did not take the lock: %q, %v", buf[:n], err)
	}
	if _, err := Take(path); !errors.Is(err, ErrHeld) {
		t.Errorf("Take while flock(1) holds it: %v, want ErrHeld", err)
	}
}

// TestTakeRefusesWhatIsNoFile: a FIFO, a directory or a symlink in the
// lock's place is an error, at once, and never ErrHeld.
func TestTakeRefusesWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.lock")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir.lock")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.lock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, sub, link} {
		fh, err := Take(path)
		if err == nil {
			fh.Close()
			t.Errorf("Take(%s) took it", filepath.Base(path))
		} else if errors.Is(err, ErrHeld) {
			t.Errorf("Take(%s): %v, not ErrHeld", filepath.Base(path), err)
		}
	}
}
