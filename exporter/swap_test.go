package exporter

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const testPageSize = 4096

// goldenCompare checks c against testdata/golden/name.prom (see
// testkit.CompareGolden); -update rewrites it from fresh().
func goldenCompare(t *testing.T, c prometheus.Collector, fresh func() prometheus.Collector, name string) {
	t.Helper()
	testkit.CompareGolden(t, c, fresh, filepath.Join("testdata", "golden", name+".prom"), *update)
}

func TestSwapCollectorGolden(t *testing.T) {
	eopnotsupp := func(path string, buf *[]byte) ([]byte, error) {
		return nil, &os.PathError{Op: "read", Path: path, Err: syscall.EOPNOTSUPP}
	}
	for _, tc := range []struct {
		name, tree string
		read       procFileReader // of pressure/memory; nil: the real one
		warnings   int            // log lines at warn level from one scrape
		infos      int            // log lines at info level from one scrape
	}{
		// PSI and oom_kill present.
		{name: "swap54", tree: "swap54"},
		// No pressure/memory: a kernel without PSI, which is no error.
		{name: "nopsi", tree: "nopsi", infos: 1},
		// PSI compiled in but disabled: reading fails with EOPNOTSUPP. No
		// fake procfs produces that errno, so the reader is swapped.
		{name: "psi_eopnotsupp", tree: "swap54", read: eopnotsupp, infos: 1},
		// No swap, and an old kernel: neither PSI nor oom_kill.
		{name: "noswap", tree: "noswap", infos: 1},
		{name: "novmstat", tree: "novmstat", warnings: 1, infos: 1},
		{name: "garbage", tree: "garbage", warnings: 2}, // meminfo and pressure/memory
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			procfs := filepath.Join("testdata", "procfs", tc.tree)
			c := newSwapCollector(procfs, testPageSize, logger)
			fresh := func() prometheus.Collector {
				c := newSwapCollector(procfs, testPageSize, slog.New(slog.DiscardHandler))
				if tc.read != nil {
					c.read = tc.read
				}
				return c
			}
			if tc.read != nil {
				c.read = tc.read
			}
			goldenCompare(t, c, fresh, "swap_"+tc.name)
			if got := strings.Count(logs.String(), "level=WARN"); got != tc.warnings {
				t.Errorf("one scrape logged %d warnings, want %d:\n%s", got, tc.warnings, logs.String())
			}
			if got := strings.Count(logs.String(), "level=INFO"); got != tc.infos {
				t.Errorf("one scrape logged %d info lines, want %d:\n%s", got, tc.infos, logs.String())
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
		{"two SwapFree lines", "MemTotal: 100 kB\nMemAvailable: 50 kB\nSwapTotal: 10 kB\nSwapFree: 5 kB\nSwapFree: 1 kB\n", "SwapFree appears twice"},
		{"a unit other than kB", "MemTotal: 100 MB\n", "not a count of kB"},
		{"a value out of range", "MemTotal: 18446744073709551615 kB\n", "out of range"},
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
	a, err := readSwapActivity("testdata/procfs/swap54")
	if err != nil {
		t.Fatal(err)
	}
	if a != (swapActivity{InPages: 1234567, OutPages: 7654321, OOMKills: 3, HaveOOMKills: true}) {
		t.Errorf("got %+v", a)
	}
	// A kernel before 4.13 has no oom_kill line: no error, and no count.
	a, err = readSwapActivity("testdata/procfs/noswap")
	if err != nil || a.HaveOOMKills || a.OOMKills != 0 {
		t.Errorf("vmstat without oom_kill: %+v, %v; want HaveOOMKills false and no error", a, err)
	}
	dir := t.TempDir()
	for _, content := range []string{"pgpgin 1\n", "pswpin x\npswpout 1\n", "pswpin 1\n", "pswpin 1\npswpout 1\noom_kill -1\n"} {
		if err := os.WriteFile(filepath.Join(dir, "vmstat"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readSwapActivity(dir); err == nil {
			t.Errorf("vmstat %q: no error", content)
		}
	}
}

func TestReadPressure(t *testing.T) {
	p, err := ReadPressure("testdata/procfs/swap54")
	if err != nil {
		t.Fatal(err)
	}
	want := Pressure{Available: true, SomeAvg10: 0.2315, FullAvg10: 0.2048,
		SomeTotal: 58761459 * time.Microsecond, FullTotal: 58464525 * time.Microsecond}
	if math.Abs(p.SomeAvg10-want.SomeAvg10) > 1e-12 || math.Abs(p.FullAvg10-want.FullAvg10) > 1e-12 {
		t.Errorf("avg10 some %v full %v, want %v %v", p.SomeAvg10, p.FullAvg10, want.SomeAvg10, want.FullAvg10)
	}
	p.SomeAvg10, p.FullAvg10 = want.SomeAvg10, want.FullAvg10
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}

	// A kernel without PSI is no error.
	if p, err := ReadPressure("testdata/procfs/nopsi"); err != nil || p != (Pressure{}) {
		t.Errorf("no pressure/memory: %+v, %v; want a zero reading (Available false) and no error", p, err)
	}
	eopnotsupp := func(path string, _ *[]byte) ([]byte, error) {
		return nil, &os.PathError{Op: "read", Path: path, Err: syscall.EOPNOTSUPP}
	}
	if p, err := readPressure("testdata/procfs/swap54", eopnotsupp); err != nil || p.Available {
		t.Errorf("EOPNOTSUPP: %+v, %v; want Available false and no error", p, err)
	}
	// Any other failure is an error, not a missing PSI.
	eacces := func(path string, _ *[]byte) ([]byte, error) {
		return nil, &os.PathError{Op: "open", Path: path, Err: syscall.EACCES}
	}
	if _, err := readPressure("testdata/procfs/swap54", eacces); !errors.Is(err, syscall.EACCES) {
		t.Errorf("EACCES: err = %v, want it passed on", err)
	}
}

func TestReadPressureErrors(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"directory", "", "not a regular file (a directory)"},
		{"NaN avg10", "some avg10=NaN avg60=0 avg300=0 total=5\nfull avg10=0 avg60=0 avg300=0 total=5\n", "not a percentage"},
		{"Inf avg10", "some avg10=0 avg60=0 avg300=0 total=5\nfull avg10=+Inf avg60=0 avg300=0 total=5\n", "not a percentage"},
		{"two some lines", "some avg10=1 avg60=0 avg300=0 total=5\nfull avg10=0 avg60=0 avg300=0 total=5\nsome avg10=2 avg60=0 avg300=0 total=6\n", "second some line"},
		{"two full lines", "some avg10=1 avg60=0 avg300=0 total=5\nfull avg10=0 avg60=0 avg300=0 total=5\nfull avg10=0 avg60=0 avg300=0 total=5\n", "second full line"},
		{"empty", "-", "no some and full lines"},
		{"some only", "some avg10=1.00 avg60=0.00 avg300=0.00 total=5\n", "no some and full lines"},
		{"bad avg10", "some avg10=x avg60=0 avg300=0 total=5\nfull avg10=0 avg60=0 avg300=0 total=5\n", "not a percentage"},
		{"avg10 over 100", "some avg10=101.00 avg60=0 avg300=0 total=5\nfull avg10=0 avg60=0 avg300=0 total=5\n", "not a percentage"},
		{"negative total", "some avg10=1 avg60=0 avg300=0 total=-5\nfull avg10=0 avg60=0 avg300=0 total=5\n", "not a count"},
		{"no total", "some avg10=1 avg60=0 avg300=0\nfull avg10=0 avg60=0 avg300=0 total=5\n", "lacks avg10 or total"},
		{"not key=value", "some avg10\nfull avg10=0 total=5\n", "not key=value"},
		{"binary", "\x00\x01garbage\n", "unexpected line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "pressure", "memory")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			var err error
			if tc.content == "" {
				err = os.Mkdir(path, 0o755)
			} else {
				err = os.WriteFile(path, []byte(strings.TrimPrefix(tc.content, "-")), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := ReadPressure(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %+v, err = %v; want an error containing %q", p, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "exporter: read ") {
				t.Errorf("err %q lacks context", err)
			}
		})
	}
}

// A host without PSI says so once, however often it is scraped, and
// counts no error.
func TestSwapCollectorLogsMissingPSIOnce(t *testing.T) {
	var logs bytes.Buffer
	c := newSwapCollector("testdata/procfs/nopsi", testPageSize, slog.New(slog.NewTextHandler(&logs, nil)))
	for range 3 {
		if n := testutil.CollectAndCount(c, "lavender_pressure_memory_waiting_seconds_total"); n != 0 {
			t.Errorf("%d waiting series on a host without PSI, want none", n)
		}
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "no PSI") {
		t.Errorf("3 scrapes without PSI logged %d lines, want 1 saying no PSI:\n%s", n, logs.String())
	}
	if got := c.pressureErrors.Load(); got != 0 {
		t.Errorf("pressure errors = %d, want 0", got)
	}
}

// Each scrape reads each procfs file once.
func TestSwapCollectorReadsPressureOnce(t *testing.T) {
	c := newSwapCollector("testdata/procfs/swap54", testPageSize, slog.New(slog.DiscardHandler))
	reads := 0
	c.read = func(path string, buf *[]byte) ([]byte, error) {
		reads++
		return readProcFile(path, buf)
	}
	if n := testutil.CollectAndCount(c); n != 14 {
		t.Errorf("one scrape gave %d series, want 14", n)
	}
	if reads != 1 {
		t.Errorf("one scrape read pressure/memory %d times, want 1", reads)
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
	if _, err := readSwapActivity(""); err != nil {
		t.Error(err)
	}
	if p, err := ReadPressure(""); err != nil || (p.Available && (p.SomeAvg10 > 1 || p.FullAvg10 > 1)) {
		t.Errorf("implausible pressure from /proc: %+v, %v", p, err)
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
