package exporter

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lavender/kmsg"
)

// TestKernelLogReadAndStatus: a log not read says why; one being read is
// readable, counts each batch before handing it on, and a read ended by
// its context is no failure.
func TestKernelLogReadAndStatus(t *testing.T) {
	k := NewKernelLog()
	k.Unreadable("kernel log: stat /dev/kmsg: permission denied")
	if readable, why := k.Status(); readable || why != "kernel log: stat /dev/kmsg: permission denied" {
		t.Errorf("unreadable: Status() = %v, %q", readable, why)
	}

	path := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := kmsg.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k = NewKernelLog()
	ctx, cancel := context.WithCancel(t.Context())
	handed := make(chan []kmsg.Fault, 1)
	done := make(chan error, 1)
	go func() {
		done <- k.Read(ctx, r, func(fs []kmsg.Fault) {
			k.mu.Lock()
			counted := k.xid[[2]string{"0000:3b:00", "79"}]
			k.mu.Unlock()
			if counted != 1 {
				t.Errorf("handed on before it was counted: %v", counted)
			}
			handed <- fs
		})
	}()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("4,1,1,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	select {
	case fs := <-handed:
		if len(fs) != 1 || fs[0].Xid != 79 {
			t.Errorf("handed %+v", fs)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no fault handed on")
	}
	if readable, why := k.Status(); !readable || why != "" {
		t.Errorf("while read: Status() = %v, %q", readable, why)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Read ended by its context: %v", err)
	}
}
