package app

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/kmsg"
)

// runExporter starts RunExporter in-process on a fake procfs and returns
// its base URL; the exporter stops with the test.
func runExporter(t *testing.T, host HostOptions, logs *testkit.SyncBuffer) string {
	t.Helper()
	host.ProcFS = testkit.SwapProcfs(t, 0.54)
	if host.HistoryStep == 0 {
		host.HistoryStep = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	env := Env{
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		OnListen: func(a []net.Addr) { addr <- a[0].String() },
	}
	go func() {
		done <- RunExporter(ctx, ExporterOptions{
			Web:    WebOptions{ListenAddresses: []string{"127.0.0.1:0"}, WriteAllow: []string{"host"}},
			Runlog: RunlogOptions{Dir: filepath.Join(t.TempDir(), "logs")},
			Host:   host,
		}, env)
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-done:
		cancel()
		t.Fatalf("RunExporter: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunExporter stopped with %v", err)
		}
	})
	testkit.WaitFor(t, 10*time.Second, func() bool {
		code, _ := testkit.MustDo(t, nil, "GET", base+"/-/ready", nil, "", "")
		return code == 200
	}, "the exporter to be ready")
	return base
}

// TestExporterWithoutGPUTelemetry: on a host without the NVIDIA driver (or
// in a build without cgo), and with GPU telemetry turned off, the exporter
// serves as ever, says why once, and exports the reason; the status page
// says it too.
func TestExporterWithoutGPUTelemetry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		on      bool
		reasons []string // any of
	}{
		{"no driver here", true, []string{"no_driver", "no_cgo", "no_gpu"}},
		{"--no-gpu", false, []string{"disabled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.on {
				if r, err := gpu.Open(gpu.Options{}); err == nil {
					r.Close()
					t.Skip("this host has an NVIDIA GPU: the no-driver case cannot be shown here")
				}
			}
			logs := &testkit.SyncBuffer{}
			base := runExporter(t, HostOptions{GPU: tc.on}, logs)
			m := testkit.Scrape(t, nil, base+"/metrics")
			found := ""
			for _, r := range tc.reasons {
				if v, err := m.Value("lavender_gpu_telemetry_enabled", testkit.Labels{"reason": r}); err == nil && v == 0 {
					found = r
				}
			}
			if found == "" {
				t.Fatalf("lavender_gpu_telemetry_enabled: %v, want 0 with one of %v", m.Series("lavender_gpu_telemetry_enabled"), tc.reasons)
			}
			if n := strings.Count(logs.String(), `msg="GPU telemetry off"`); n != 1 {
				t.Errorf("%d log lines say GPU telemetry is off, want 1:\n%s", n, logs)
			}
			if m.Has("lavender_swap_used_ratio") == false {
				t.Error("the exporter lost its other metrics")
			}
			_, page := testkit.MustDo(t, nil, "GET", base+"/", nil, "", "")
			if !strings.Contains(page, `id="gpus"`) || !strings.Contains(page, "GPU telemetry off") {
				t.Error("the status page does not say that GPU telemetry is off")
			}
		})
	}
}

// TestFirstXids: of a kernel log batch, the Xids NVML (or an earlier batch)
// reported already are dropped, the rest of the batch passes in order, and
// an empty remainder hands nothing on.
func TestFirstXids(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var dedup gpu.XidDedup
	var got [][]kmsg.Fault
	handle := firstXids(&dedup, func() time.Time { return now }, func(fs []kmsg.Fault) { got = append(got, fs) })
	if !dedup.First("0000:3b:00", 79, now) {
		t.Fatal("NVML's report of Xid 79 is not a first")
	}
	xid79 := kmsg.Fault{Kind: kmsg.Xid, GPU: "0000:3b:00", Xid: 79}
	xid48 := kmsg.Fault{Kind: kmsg.Xid, GPU: "0000:3b:00", Xid: 48}
	disk := kmsg.Fault{Kind: kmsg.Storage, Device: "nvme0n1"}
	handle([]kmsg.Fault{xid79, disk, xid48})
	handle([]kmsg.Fault{xid79, xid48})
	if len(got) != 1 || len(got[0]) != 2 || got[0][0].Kind != kmsg.Storage || got[0][1].Xid != 48 {
		t.Errorf("handed on %+v, want the storage fault and Xid 48 once", got)
	}
}
