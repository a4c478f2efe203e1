package watchdog

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/kmsg"
)

// gatePusher holds every push until release is closed, as a slow Bark
// does, and records each push and whether its context had ended by the
// time it was answered.
type gatePusher struct {
	started chan struct{}
	release chan struct{}

	mu      sync.Mutex
	pushes  [][]Alert
	ctxErrs []error
}

func newGatePusher() *gatePusher {
	return &gatePusher{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (p *gatePusher) Push(ctx context.Context, alerts []Alert) (int, int) {
	p.started <- struct{}{}
	<-p.release
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pushes = append(p.pushes, alerts)
	p.ctxErrs = append(p.ctxErrs, ctx.Err())
	return 1, 0
}

func (p *gatePusher) result() ([][]Alert, []error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pushes, p.ctxErrs
}

// runUntilStopped runs wd until the first push is on the wire, stops it
// (ctx ends) while the push waits, releases the push, and waits for Run
// to return.
func runUntilStopped(t *testing.T, wd *Watchdog, p *gatePusher, onTheWire func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); wd.Run(ctx) }()
	select {
	case <-p.started:
	case <-time.After(30 * time.Second): // a guard against hanging, not a speed check
		cancel()
		t.Fatal("no push")
	}
	onTheWire()
	cancel()
	close(p.release)
	<-done
}

// TestStopLetsAPushOnTheWireFinish: a stop that comes while a poll's push
// is on its way never cancels it; cut off, a push Bark may have had
// counts as failed, or is lost.
func TestStopLetsAPushOnTheWireFinish(t *testing.T) {
	swap, err := NewSwapRule(SwapConfig{Threshold: 0.5, Hysteresis: 0.05, Repeat: time.Hour, Retry: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p := newGatePusher()
	wd, err := New(Config{Interval: time.Millisecond, Rules: []Rule{swap}, Push: p, Logger: slog.New(slog.DiscardHandler),
		Read: func(context.Context) (Sample, error) { return Sample{Swap: swapOf(0.6)}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	runUntilStopped(t, wd, p, func() {})
	pushes, errs := p.result()
	if len(pushes) != 1 || errs[0] != nil {
		t.Fatalf("%d pushes, context at the answer %v; want one push, its context live", len(pushes), errs)
	}
	if st := wd.State()[0]; st.Armed {
		t.Errorf("swap rule armed again after its push was delivered: %+v", st)
	}
}

// TestStopPushesQueuedFaults: a kernel fault queued while an earlier push
// is on the wire still goes out when the watchdog stops, rather than being
// dropped with the queue.
func TestStopPushesQueuedFaults(t *testing.T) {
	rules, err := NewRules(RuleFlags{Interval: time.Hour, Threshold: 0.5, Hysteresis: 0.05, Repeat: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p := newGatePusher()
	wd, err := New(Config{Interval: time.Hour, Rules: rules, Push: p, Logger: slog.New(slog.DiscardHandler),
		Read: func(context.Context) (Sample, error) { return Sample{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	wd.Faults([]KernelFault{xid79(1)})
	runUntilStopped(t, wd, p, func() {
		wd.Faults([]KernelFault{{Fault: kmsg.Fault{Kind: kmsg.Storage, Device: "nvme1n1p1", Storage: kmsg.ReadOnly}}})
	})
	pushes, errs := p.result()
	if len(pushes) != 2 || len(pushes[1]) != 1 || pushes[1][0].Rule != "disk" {
		t.Fatalf("pushes %+v, want the GPU fault's and then the disk fault's", pushes)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("push %d answered with its context ended: %v", i, err)
		}
	}
}
