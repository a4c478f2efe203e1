package exporter

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/kmsg"
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
		done <- k.Read(ctx, r, nil, func(fs []kmsg.Fault) {
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

// TestKernelLogReadableFollowsThePath: lavender_kernel_log_readable, read
// through the registry, is 0 while the log's file is gone and while a
// device that is no kernel log (/dev/zero) stands at its path, and 1 once
// a file is back; the log says each change once, not at each look.
func TestKernelLogReadableFollowsThePath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kern.log")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := kmsg.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k := NewKernelLog()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(k)
	readable := func() float64 {
		m, err := testkit.GatherMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		v, err := m.Value("lavender_kernel_log_readable", nil)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var logs testkit.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	faults := make(chan []kmsg.Fault, 4)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- k.Read(ctx, r, logger, func(fs []kmsg.Fault) { faults <- fs }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Read: %v", err)
		}
	}()
	// Read marks the log readable as it starts, in its own goroutine.
	testkit.WaitFor(t, 20*time.Second, func() bool { return readable() == 1 }, "readable 1 while the file is read")

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { return readable() == 0 }, "readable 0 with the file gone")
	if _, why := k.Status(); !strings.Contains(why, "no such file") {
		t.Errorf("why: %q", why)
	}
	if err := os.Symlink("/dev/zero", path); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { _, why := k.Status(); return strings.Contains(why, "refusing") }, "/dev/zero refused")
	if v := readable(); v != 0 {
		t.Errorf("readable %v with /dev/zero at the path", v)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("4,1,1,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case fs := <-faults:
		if len(fs) != 1 || fs[0].Xid != 79 {
			t.Errorf("handed %+v", fs)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the new file's record was not read")
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { return readable() == 1 }, "readable 1 with a file back")
	out := logs.String()
	if n := strings.Count(out, "kernel log not readable"); n != 1 {
		t.Errorf("%d lines say the log is not readable; want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "kernel log readable again"); n != 1 {
		t.Errorf("%d lines say the log is readable again; want 1:\n%s", n, out)
	}
}
