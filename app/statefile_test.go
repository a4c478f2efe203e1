package app

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/kmsg"
)

// inode is the inode of the file at path: a state file is saved by a
// rename, so a save gives it a new one.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Ino
}

// A second serve started on the logs dir of one that runs keeps no
// watchdog state and no kernel log position, and says so: it does not
// carry over the first one's swap incident as its own (so it pushes its
// own), nor resume from the first one's kernel log position, and writes
// over neither file, at its polls or at its stop.
func TestSecondServeKeepsNoServeState(t *testing.T) {
	procfs := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.54)})
	setBootID(t, procfs, "5c3a6f0e-0000-4000-8000-000000000001")
	first := newRestartRig(t, procfs, nil, 20*time.Millisecond)
	if r, err := kmsg.Open(kmsg.DefaultPath); err == nil {
		r.Close()
		first.kmsg = kmsg.DefaultPath
	} else {
		t.Logf("kernel log not readable here (%v): only the watchdog state is checked", err)
	}
	a := first.start()
	first.bark.WaitPushes(t, 1)
	statePath := filepath.Join(first.logDir, WatchdogStateFileName)
	testkit.WaitFor(t, 10*time.Second, func() bool { _, err := os.Stat(statePath); return err == nil }, "the first serve's watchdog state")
	stateInode := inode(t, statePath)

	second := newRestartRig(t, procfs, nil, 20*time.Millisecond)
	second.logDir, second.kmsg = first.logDir, first.kmsg
	b := second.start()
	second.bark.WaitPushes(t, 1) // its own swap push: nothing carried over
	b.waitPolls(5)
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "ANOTHER LAVENDER SERVE KEEPS ITS WATCHDOG STATE AND KERNEL LOG POSITION IN THIS LOGS DIR") {
		t.Errorf("the second serve does not say it keeps no state:\n%s", logs)
	}
	for _, kept := range []string{"carried over from the last run", "kernel log read on from where", "kernel log position is of another boot"} {
		if strings.Contains(logs, kept) {
			t.Errorf("the second serve used the first one's state (%q):\n%s", kept, logs)
		}
	}
	if got := inode(t, statePath); got != stateInode {
		t.Error("the second serve wrote over the first one's watchdog state")
	}
	if first.kmsg != "" {
		if got := readPosition(t, first.logDir); got.BootID != "5c3a6f0e-0000-4000-8000-000000000001" {
			t.Errorf("kernel log position of boot %q", got.BootID)
		}
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}

	// The first serve gone, the lock is free: the next serve carries over
	// the incident the first one saved.
	c := first.start()
	c.waitPolls(2)
	if !strings.Contains(c.logs.String(), "watchdog incidents carried over from the last run of serve") {
		t.Errorf("the serve after the first did not carry over its incident:\n%s", c.logs)
	}
}
