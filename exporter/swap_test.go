package exporter

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const testPageSize = 4096

// goldenCompare checks the text exposition of c against
// testdata/golden/name.prom. Under -update it first rewrites the file from a
// scrape of fresh(), a collector in the same state as c (c itself must see
// its first scrape in the comparison, as counters move).
func goldenCompare(t *testing.T, c prometheus.Collector, fresh func() prometheus.Collector, name string) {
	t.Helper()
	golden := filepath.Join("testdata", "golden", name+".prom")
	if *update {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(fresh())
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if err := testutil.CollectAndCompare(c, bytes.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestSwapCollectorGolden(t *testing.T) {
	for _, tc := range []struct {
		name     string
		warnings int // log lines at warn level from one scrape
	}{
		{"swap54", 0},
		{"noswap", 0},
		{"novmstat", 1},
		{"garbage", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			procfs := filepath.Join("testdata", "procfs", tc.name)
			c := newSwapCollector(procfs, testPageSize, logger)
			fresh := func() prometheus.Collector {
				return newSwapCollector(procfs, testPageSize, slog.New(slog.DiscardHandler))
			}
			goldenCompare(t, c, fresh, "swap_"+tc.name)
			if got := strings.Count(logs.String(), "\n"); got != tc.warnings {
				t.Errorf("one scrape logged %d lines, want %d:\n%s", got, tc.warnings, logs.String())
			}
		})
	}
}

// A failure that persists is logged once, not at every scrape, and its
// recovery is logged too.
func TestSwapCollectorLogsOncePerFailure(t *testing.T) {
	dir := t.TempDir()
	meminfo, err := os.ReadFile("testdata/procfs/swap54/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), meminfo, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c := newSwapCollector(dir, testPageSize, slog.New(slog.NewTextHandler(&logs, nil)))
	for range 3 {
		testutil.CollectAndCount(c)
	}
	if n := strings.Count(logs.String(), "left out"); n != 1 {
		t.Errorf("3 scrapes without vmstat logged %d warnings, want 1:\n%s", n, logs.String())
	}
	if got := c.vmstatErrors.Load(); got != 3 {
		t.Errorf("vmstat errors = %d, want 3", got)
	}
	vmstat, _ := os.ReadFile("testdata/procfs/swap54/vmstat")
	if err := os.WriteFile(filepath.Join(dir, "vmstat"), vmstat, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "lavender_swap_in_bytes_total"); n != 1 {
		t.Errorf("after vmstat came back: %d swap-in series, want 1", n)
	}
	if !strings.Contains(logs.String(), "readable again") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
}

func TestReadSwap(t *testing.T) {
	const gib = 1 << 30
	s, err := ReadSwap(context.Background(), "testdata/procfs/swap54")
	if err != nil {
		t.Fatal(err)
	}
	if s.TotalBytes != 32*gib {
		t.Errorf("TotalBytes = %d, want 32 GiB", s.TotalBytes)
	}
	if s.UsedBytes+s.FreeBytes != s.TotalBytes || s.FreeBytes != 15435039*1024 {
		t.Errorf("used %d + free %d != total %d", s.UsedBytes, s.FreeBytes, s.TotalBytes)
	}
	if math.Abs(s.UsedRatio-0.54) > 1e-6 {
		t.Errorf("UsedRatio = %v, want 0.54", s.UsedRatio)
	}
	if s.CachedBytes != gib || math.Abs(s.MemAvailableRatio-0.15) > 1e-9 {
		t.Errorf("CachedBytes = %d, MemAvailableRatio = %v; want 1 GiB, 0.15", s.CachedBytes, s.MemAvailableRatio)
	}

	s, err = ReadSwap(context.Background(), "testdata/procfs/noswap")
	if err != nil {
		t.Fatal(err)
	}
	if s.UsedRatio != 0 || math.IsNaN(s.UsedRatio) || s.TotalBytes != 0 {
		t.Errorf("no swap: %+v, want zero totals and ratio 0", s)
	}
}

func TestReadSwapErrors(t *testing.T) {
	for _, tc := range []struct {
		name, meminfo, want string
	}{
		{"missing", "", "no such file"},
		{"empty", "-", "no MemTotal"},
		{"binary", "\x00\x01\x02garbage\n\xff\xfe", "no MemTotal"},
		{"bad number", "MemTotal: 100 kB\nSwapTotal: 1e9 kB\n", "invalid syntax"},
		{"free over total", "MemTotal: 100 kB\nMemAvailable: 50 kB\nSwapTotal: 10 kB\nSwapFree: 20 kB\n", "exceeds SwapTotal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.meminfo != "" {
				content := strings.TrimPrefix(tc.meminfo, "-")
				if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ReadSwap(context.Background(), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "exporter: read ") {
				t.Errorf("err %q lacks context", err)
			}
		})
	}
}

func TestReadSwapActivity(t *testing.T) {
	a, err := ReadSwapActivity("testdata/procfs/swap54")
	if err != nil {
		t.Fatal(err)
	}
	if a != (SwapActivity{InPages: 1234567, OutPages: 7654321}) {
		t.Errorf("got %+v", a)
	}
	dir := t.TempDir()
	for _, content := range []string{"pgpgin 1\n", "pswpin x\npswpout 1\n", "pswpin 1\n"} {
		if err := os.WriteFile(filepath.Join(dir, "vmstat"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSwapActivity(dir); err == nil {
			t.Errorf("vmstat %q: no error", content)
		}
	}
}

// The host's own /proc must parse too; skipped where there is none.
func TestReadSwapHostProc(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	s, err := ReadSwap(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if s.UsedRatio < 0 || s.UsedRatio > 1 || s.MemAvailableRatio <= 0 || s.MemAvailableRatio > 1 {
		t.Errorf("implausible reading of /proc: %+v", s)
	}
	if _, err := ReadSwapActivity(""); err != nil {
		t.Error(err)
	}
}

func BenchmarkReadSwap(b *testing.B) {
	for _, procfs := range []string{"testdata/procfs/swap54", "/proc"} {
		b.Run(strings.ReplaceAll(procfs, "/", "_"), func(b *testing.B) {
			if _, err := ReadSwap(context.Background(), procfs); err != nil {
				b.Skip(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ReadSwap(context.Background(), procfs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
