package proctree

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

func TestParseStat(t *testing.T) {
	s, err := parseStat([]byte("4242 (python3 (a) b) S 17 4242 17 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 100 10\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.PID != 4242 || s.Comm != "python3 (a) b" || s.State != 'S' || s.PPID != 17 || s.StartTicks != 98765 {
		t.Errorf("parsed %+v", s)
	}
	for _, bad := range []string{"", "4242 python3 S 1", "x (p) S 1 2 3", "1 (p) S 1 2 3"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// Real processes: a child of this test is alive, descends from it, and
// once killed and reaped is gone; a start time that is not its own names
// another process.
func TestRealProcess(t *testing.T) {
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	alive, start, err := Alive("", pid, 0)
	if err != nil || !alive || start == 0 {
		t.Fatalf("Alive = %v, %d, %v", alive, start, err)
	}
	if alive, _, _ := Alive("", pid, start+1); alive {
		t.Error("a process with another start time counts as the one asked about")
	}
	if got, ok := AncestorAmong("", pid, []int{1, os.Getpid()}); !ok || got != os.Getpid() {
		t.Errorf("AncestorAmong = %d, %v; want this test's pid", got, ok)
	}
	tree, err := Scan("")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := tree.AncestorAmong(pid, []int{os.Getpid()}); !ok || got != os.Getpid() {
		t.Errorf("Tree.AncestorAmong = %d, %v", got, ok)
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	if alive, _, err := Alive("", pid, start); alive || err != nil {
		t.Errorf("a reaped child: alive %v, %v", alive, err)
	}
	if _, err := ReadStat("", pid); !errors.Is(err, ErrGone) {
		t.Errorf("ReadStat of a reaped child: %v, want ErrGone", err)
	}
	if _, ok := tree.AncestorAmong(pid, []int{os.Getpid()}); !ok {
		t.Error("the scanned tree forgot a process that ended after the scan")
	}
	h, err := ReadHost("")
	if err != nil || !h.Known() {
		t.Errorf("ReadHost = %+v, %v", h, err)
	}
}
