package watchdog

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/kmsg"
)

func kernelRules(t *testing.T, repeat time.Duration) (gpu, disk *KernelRule) {
	t.Helper()
	rules, err := NewKernelRules(KernelConfig{Repeat: repeat, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return rules[0].(*KernelRule), rules[1].(*KernelRule)
}

func xid79(usec uint64) KernelFault {
	return KernelFault{Fault: kmsg.Fault{Kind: kmsg.Xid, GPU: "0000:3b:00", Xid: 79, PID: 4242, Name: "python3", Usec: usec},
		Phase: "Pretrain 1/3", ByPID: true}
}

// TestKernelRuleFoldsRepeats: the first record pushes at once; repeats in
// the window are one push at its end that counts them; a window without
// repeats ends the incident, and the next record pushes at once again.
func TestKernelRuleFoldsRepeats(t *testing.T) {
	gpu, disk := kernelRules(t, 10*time.Minute)
	now := t0
	got := gpu.Fault(xid79(1), now)
	if len(got) != 1 || got[0].Status != Firing || got[0].Rule != "gpu" || got[0].Fault.Xid != 79 || got[0].Phase != "Pretrain 1/3" {
		t.Fatalf("first record: %+v", got)
	}
	if disk.Fault(xid79(1), now) != nil {
		t.Error("the disk rule took a GPU fault")
	}
	gpu.Pushed(got[0], true, now)
	for i := range 41 {
		if a := gpu.Fault(xid79(uint64(10_000_000+i)), now.Add(time.Duration(i)*time.Second)); a != nil {
			t.Fatalf("repeat %d pushed: %+v", i, a)
		}
	}
	// Another Xid on the same GPU is a fault of its own.
	other := xid79(2)
	other.Xid = 48
	if a := gpu.Fault(other, now.Add(time.Minute)); len(a) != 1 {
		t.Fatalf("Xid 48 after 79: %+v", a)
	}
	gpu.Pushed(Alert{Rule: RuleGPU, Fault: other, Began: now.Add(time.Minute)}, true, now.Add(time.Minute))
	if a := gpu.Observe(Sample{}, now.Add(9*time.Minute)); a != nil {
		t.Fatalf("pushed before the window ended: %+v", a)
	}
	end := now.Add(10 * time.Minute)
	a := gpu.Observe(Sample{}, end)
	if len(a) != 1 || a[0].Status != Reminder || a[0].Repeats != 41 || a[0].Window != 10*time.Minute || a[0].Fault.Xid != 79 {
		t.Fatalf("end of the window: %+v", a)
	}
	gpu.Pushed(a[0], true, end)
	// The next window has no repeats: it ends quietly, and so does the
	// incident.
	if a := gpu.Observe(Sample{}, end.Add(10*time.Minute)); a != nil {
		t.Fatalf("a window without repeats pushed: %+v", a)
	}
	if a := gpu.Fault(xid79(99_000_000), end.Add(11*time.Minute)); len(a) != 1 || a[0].Status != Firing {
		t.Fatalf("after the incident: %+v", a)
	}
}

// TestKernelRuleEcho: the driver's "GPU has fallen off the bus" right after
// Xid 79 is the same report, neither a push nor a repeat.
func TestKernelRuleEcho(t *testing.T) {
	gpu, _ := kernelRules(t, 10*time.Minute)
	a := gpu.Fault(xid79(5_000_000), t0)
	gpu.Pushed(a[0], true, t0)
	echo := KernelFault{Fault: kmsg.Fault{Kind: kmsg.FallenOffBus, GPU: "0000:3b:00", Usec: 5_000_010}}
	if got := gpu.Fault(echo, t0); got != nil {
		t.Fatalf("echo pushed: %+v", got)
	}
	if got := gpu.Observe(Sample{}, t0.Add(10*time.Minute)); got != nil {
		t.Errorf("echo counted as a repeat: %+v", got)
	}
}

// TestKernelRuleRetries: a push no target took is retried with a backoff,
// carrying the repeats that came meanwhile.
func TestKernelRuleRetries(t *testing.T) {
	_, disk := kernelRules(t, 10*time.Minute)
	ro := KernelFault{Fault: kmsg.Fault{Kind: kmsg.Storage, Device: "nvme1n1p1", Storage: kmsg.ReadOnly}}
	a := disk.Fault(ro, t0)
	if len(a) != 1 {
		t.Fatalf("read-only: %+v", a)
	}
	disk.Pushed(a[0], false, t0)
	disk.Fault(ro, t0.Add(time.Second))
	if got := disk.Observe(Sample{}, t0.Add(4*time.Second)); got != nil {
		t.Fatalf("retried before the backoff: %+v", got)
	}
	got := disk.Observe(Sample{}, t0.Add(5*time.Second))
	if len(got) != 1 || got[0].Status != Firing || got[0].Repeats != 1 {
		t.Fatalf("retry: %+v", got)
	}
	if st := disk.State(); st.Armed || !st.Since.Equal(t0) {
		t.Errorf("state while retrying: %+v", st)
	}
}

// TestKernelRuleBounded: a log naming endless devices keeps at most
// maxIncidents of them.
func TestKernelRuleBounded(t *testing.T) {
	_, disk := kernelRules(t, 10*time.Minute)
	for i := range 3 * maxIncidents {
		disk.Fault(KernelFault{Fault: kmsg.Fault{Kind: kmsg.Storage, Device: "sd" + string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('0'+i/260)), Storage: kmsg.IOError}}, t0.Add(time.Duration(i)))
	}
	if n := len(disk.incidents); n > maxIncidents {
		t.Errorf("%d incidents kept", n)
	}
}

// chanPusher hands every push to a channel.
type chanPusher struct {
	pushes chan []Alert
}

func (p *chanPusher) Push(_ context.Context, alerts []Alert) (int, int) {
	p.pushes <- alerts
	return 1, 0
}

// runEventWatchdog runs a watchdog with the default rules, polling every
// hour, so that only faults handed to Faults push; it stops with the test.
func runEventWatchdog(t *testing.T) ([]Rule, *chanPusher, *Watchdog) {
	t.Helper()
	rules, err := NewRules(RuleFlags{Interval: time.Hour, Threshold: 0.5, Hysteresis: 0.05, Repeat: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p := &chanPusher{pushes: make(chan []Alert, 8)}
	wd, err := New(Config{Interval: time.Hour, Rules: rules, Push: p, Logger: slog.New(slog.DiscardHandler),
		Read: func(context.Context) (Sample, error) { return Sample{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { wd.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return rules, p, wd
}

// TestFaultsPushWithoutAPoll: a fault handed to Faults pushes from the
// event goroutine while the poll interval is an hour away.
func TestFaultsPushWithoutAPoll(t *testing.T) {
	_, p, wd := runEventWatchdog(t)
	wd.Faults([]KernelFault{xid79(1), xid79(2), {Fault: kmsg.Fault{Kind: kmsg.Storage, Device: "nvme1n1p1", Storage: kmsg.ReadOnly}}})
	select {
	case got := <-p.pushes:
		if len(got) != 2 || got[0].Rule != "gpu" || got[1].Rule != "disk" {
			t.Fatalf("push: %+v", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no push without a poll")
	}
	for _, st := range wd.State() {
		if (st.Name == RuleGPU || st.Name == RuleDisk) && st.Armed {
			t.Errorf("%s armed after its push", st.Name)
		}
	}
}

// TestKernelFloodIsOneIncident: a fault logged every second, polled every
// 5s, is one incident for as long as it lasts: one firing push, then at
// the end of each window a reminder of the same incident (same Began)
// that counts the window's repeats, every record counted once. The record
// that comes after a window ends but before the poll that pushes its
// count is a repeat, not a new incident. Once the flood stops, a quiet
// window ends the incident, and the next record is a new one.
func TestKernelFloodIsOneIncident(t *testing.T) {
	const repeat = 10 * time.Minute
	for _, tc := range []struct {
		name  string
		rule  func(gpu, disk *KernelRule) *KernelRule
		fault KernelFault
	}{
		{"gpu xid", func(gpu, _ *KernelRule) *KernelRule { return gpu },
			KernelFault{Fault: kmsg.Fault{Kind: kmsg.Xid, GPU: "0000:3b:00", Xid: 13}}},
		{"storage fault", func(_, disk *KernelRule) *KernelRule { return disk },
			KernelFault{Fault: kmsg.Fault{Kind: kmsg.Storage, Device: "nvme1n1p1", Storage: kmsg.IOError}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rule(kernelRules(t, repeat))
			var pushes []Alert
			push := func(alerts []Alert, now time.Time) {
				for _, a := range alerts {
					pushes = append(pushes, a)
					r.Pushed(a, true, now)
				}
			}
			const flood = 21 * 60 // seconds of a record every second
			records := 0
			for sec := 0; sec <= 41*60; sec++ {
				now := t0.Add(time.Duration(sec) * time.Second)
				if sec < flood {
					f := tc.fault
					f.Usec = uint64(sec) * 1e6
					push(r.Fault(f, now), now)
					records++
				}
				if sec%5 == 2 { // the poll, out of step with the records
					push(r.Observe(Sample{}, now), now)
				}
			}
			if len(pushes) == 0 || pushes[0].Status != Firing || !pushes[0].Began.Equal(t0) {
				t.Fatalf("first push: %+v", pushes)
			}
			counted := 0
			for _, a := range pushes[1:] {
				if a.Status != Reminder || !a.Began.Equal(t0) {
					t.Errorf("push at %s: %s began %s, want a reminder of the incident that began at 0s",
						a.At.Sub(t0), a.Status, a.Began.Sub(t0))
				}
				if a.Repeats == 0 || a.Window < repeat {
					t.Errorf("push at %s counts %d repeats in %s", a.At.Sub(t0), a.Repeats, a.Window)
				}
				counted += a.Repeats
			}
			if counted != records-1 {
				t.Errorf("reminders count %d repeats of %d records after the first", counted, records-1)
			}
			// 21 minutes of records span three windows: 0s-10m2s,
			// 10m2s-20m4s and 20m4s-30m7s (each ends at its first poll).
			if len(pushes) != 4 {
				t.Errorf("%d pushes, want the firing one and a reminder for each of the three windows", len(pushes))
			}
			if st := r.State(); !st.Armed {
				t.Errorf("after a quiet window: %+v", st)
			}
			now := t0.Add(42 * time.Minute)
			f := tc.fault
			f.Usec = uint64(now.Sub(t0) / time.Microsecond)
			if a := r.Fault(f, now); len(a) != 1 || a[0].Status != Firing || !a[0].Began.Equal(now) {
				t.Errorf("a record after the quiet window: %+v, want a new incident", a)
			}
		})
	}
}
