package exporter

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shirou/gopsutil/v4/mem"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// handReading is what parseMeminfo alone makes of dir's meminfo: the
// reading before gopsutil came back, to compare gopsutil's with.
func handReading(t *testing.T, dir string) Swap {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "meminfo"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseMeminfo(data)
	if err != nil {
		t.Fatal(err)
	}
	s, err := swapFromFigures(m.MemTotal, m.MemAvailable, m.SwapTotal, m.SwapFree, m.SwapCached)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGopsutilReadingMatchesHandParser: on fake procfs trees gopsutil's
// figures are the hand parser's to the byte, and gopsutil reads the tree
// it is given in ctx, not /proc (each case's root differs, and they run
// in parallel).
func TestGopsutilReadingMatchesHandParser(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"swap54", func(*testing.T) string { return "testdata/procfs/swap54" }},
		{"noswap", func(*testing.T) string { return "testdata/procfs/noswap" }},
		{"testkit, 10 % of 32 GiB", func(t *testing.T) string {
			return testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(testkit.Swap32GiBinKB, 0.1)}).Dir
		}},
		{"testkit, 97 % of 1 GiB, little memory left", func(t *testing.T) string {
			return testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(1<<20, 0.97), MemTotalKB: 8 << 20, MemAvailableKB: 100 << 10}).Dir
		}},
		{"testkit, no swap", func(t *testing.T) string {
			return testkit.NewProcfs(t, testkit.Host{}).Dir
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := tc.dir(t)
			called := false
			got, err := readSwap(context.Background(), dir, func(ctx context.Context) (*mem.VirtualMemoryStat, error) {
				called = true
				return mem.VirtualMemoryWithContext(ctx)
			})
			if err != nil {
				t.Fatal(err)
			}
			if !called {
				t.Fatal("gopsutil was not asked")
			}
			if want := handReading(t, dir); got != want {
				t.Errorf("gopsutil read %+v, the hand parser %+v", got, want)
			}
		})
	}
}

// TestGopsutilIgnoresHostProcEnv: the root in ctx wins over a HOST_PROC
// in the environment (which gopsutil reads too, for the whole process).
func TestGopsutilIgnoresHostProcEnv(t *testing.T) {
	t.Setenv("HOST_PROC", "testdata/procfs/noswap")
	s, err := ReadSwap(context.Background(), "testdata/procfs/swap54")
	if err != nil {
		t.Fatal(err)
	}
	if want := handReading(t, "testdata/procfs/swap54"); s != want {
		t.Errorf("with HOST_PROC set elsewhere: %+v, want swap54's %+v", s, want)
	}
}

// TestGopsutilReadingOfRealProc: on this host's /proc the figures agree
// with the hand parser's read just before. Memory moves between the two
// reads, so the totals must be equal and the ratios close.
func TestGopsutilReadingOfRealProc(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo:", err)
	}
	want := handReading(t, "/proc")
	got, err := ReadSwap(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got.TotalBytes != want.TotalBytes {
		t.Errorf("swap total: gopsutil %d, hand parser %d", got.TotalBytes, want.TotalBytes)
	}
	if math.Abs(got.MemAvailableRatio-want.MemAvailableRatio) > 0.05 || math.Abs(got.UsedRatio-want.UsedRatio) > 0.05 {
		t.Errorf("gopsutil %+v, hand parser %+v: ratios more than 0.05 apart", got, want)
	}
}

// TestGopsutilPanicIsAReadError: a panic inside gopsutil is recovered and
// returned as an error naming the file. The first case is gopsutil's own:
// given a meminfo without MemAvailable it reads zoneinfo and indexes each
// line's first field, so a blank line panics (ReadSwap never lets it read
// such a meminfo; this calls it directly to show the recovery holds for
// the real thing).
func TestGopsutilPanicIsAReadError(t *testing.T) {
	t.Run("gopsutil on a blank zoneinfo line", func(t *testing.T) {
		dir := t.TempDir()
		for name, content := range map[string]string{
			"meminfo":  "MemTotal: 1000 kB\nMemFree: 100 kB\nActive(file): 10 kB\nInactive(file): 10 kB\nSReclaimable: 10 kB\n",
			"zoneinfo": "Node 0\n\nlow 5\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := readVirtualMemory(withProcRoot(context.Background(), dir), mem.VirtualMemoryWithContext)
		if err == nil || !strings.Contains(err.Error(), "gopsutil panicked") || !strings.Contains(err.Error(), "index out of range") {
			t.Fatalf("err = %v, want the recovered index panic", err)
		}
	})
	for _, tc := range []struct {
		name  string
		panic func()
		want  string
	}{
		{"a runtime error", func() { var fields []string; _ = fields[len(fields)-1] }, "runtime error: index out of range [-1]"},
		{"a string", func() { panic("parser lost its place") }, "parser lost its place"},
		{"an error value", func() { panic(errors.New("zoneinfo: no low")) }, "zoneinfo: no low"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			panicking := func(context.Context) (*mem.VirtualMemoryStat, error) { tc.panic(); return nil, nil }
			_, err := readSwap(context.Background(), "testdata/procfs/swap54", panicking)
			if err == nil || !strings.Contains(err.Error(), "gopsutil panicked: "+tc.want) ||
				!strings.HasPrefix(err.Error(), "exporter: read testdata/procfs/swap54/meminfo") {
				t.Fatalf("err = %v, want the panic %q as an error naming meminfo", err, tc.want)
			}
		})
	}
}

// TestGopsutilPanicInTheCollector: the scrape goes on without the meminfo
// metrics, each panic counts as a meminfo read error, and the warning is
// logged once, as for any other failed read.
func TestGopsutilPanicInTheCollector(t *testing.T) {
	var logs bytes.Buffer
	c := newSwapCollector("testdata/procfs/swap54", testPageSize, slog.New(slog.NewTextHandler(&logs, nil)))
	c.virtualMemory = func(context.Context) (*mem.VirtualMemoryStat, error) { panic("parser lost its place") }
	for range 2 {
		if n := testutil.CollectAndCount(c, "lavender_swap_used_ratio", "lavender_memory_available_ratio"); n != 0 {
			t.Errorf("%d meminfo series after a panic, want none", n)
		}
		if n := testutil.CollectAndCount(c, "lavender_swap_in_bytes_total"); n != 1 {
			t.Errorf("%d vmstat series, want 1: a meminfo panic must not cost the rest", n)
		}
	}
	// CollectAndCount collects twice a round: four scrapes in all.
	if got := c.meminfoErrors.Load(); got != 4 {
		t.Errorf("meminfo read errors = %d after 4 scrapes that panicked, want 4", got)
	}
	if n := strings.Count(logs.String(), "left out"); n != 1 || !strings.Contains(logs.String(), "gopsutil panicked: parser lost its place") {
		t.Errorf("want one warning that names the panic:\n%s", logs.String())
	}
}

// TestGopsutilFiguresRefused: figures no meminfo can hold are errors, not
// clamped ratios; NaN in particular never leaves ReadSwap. The last cases
// are files: a negative count never reaches gopsutil.
func TestGopsutilFiguresRefused(t *testing.T) {
	const gib = 1 << 30
	valid := mem.VirtualMemoryStat{Total: 64 * gib, Available: 16 * gib, Used: 48 * gib, UsedPercent: 75,
		SwapTotal: 8 * gib, SwapFree: 4 * gib}
	for _, tc := range []struct {
		name string
		edit func(*mem.VirtualMemoryStat)
		want string
	}{
		{"no memory: every ratio would be NaN", func(vm *mem.VirtualMemoryStat) { vm.Total, vm.Available, vm.Used, vm.UsedPercent = 0, 0, 0, math.NaN() }, "is not a percentage"},
		{"used percentage NaN", func(vm *mem.VirtualMemoryStat) { vm.UsedPercent = math.NaN() }, "NaN % is not a percentage"},
		{"used percentage negative", func(vm *mem.VirtualMemoryStat) { vm.UsedPercent = -1 }, "-1 % is not a percentage"},
		{"no memory, percentage 0", func(vm *mem.VirtualMemoryStat) { vm.Total, vm.Available, vm.UsedPercent = 0, 0, 0 }, "MemTotal is 0"},
		{"more available than there is: used memory negative", func(vm *mem.VirtualMemoryStat) { vm.Available = 65 * gib }, "MemAvailable 68157440 kB exceeds MemTotal 67108864 kB"},
		{"more swap free than there is: used swap negative", func(vm *mem.VirtualMemoryStat) { vm.SwapFree = 9 * gib }, "SwapFree 9437184 kB exceeds SwapTotal 8388608 kB"},
		{"no reading and no error", nil, "gopsutil returned no reading"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(context.Context) (*mem.VirtualMemoryStat, error) { return nil, nil }
			if tc.edit != nil {
				vm := valid
				tc.edit(&vm)
				read = func(context.Context) (*mem.VirtualMemoryStat, error) { return &vm, nil }
			}
			s, err := readSwap(context.Background(), "testdata/procfs/swap54", read)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "exporter: read ") {
				t.Fatalf("reading %+v, err = %v; want an error containing %q", s, err, tc.want)
			}
		})
	}
	s, err := readSwap(context.Background(), "testdata/procfs/swap54", func(context.Context) (*mem.VirtualMemoryStat, error) { v := valid; return &v, nil })
	if err != nil || s.MemAvailableRatio != 0.25 || s.UsedRatio != 0.5 {
		t.Errorf("the valid figures: %+v, %v; want ratios 0.25 and 0.5", s, err)
	}

	for _, meminfo := range []string{
		"MemTotal: 1000 kB\nMemAvailable: -5 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
		"MemTotal: 1000 kB\nMemAvailable: 500 kB\nSwapTotal: 10 kB\nSwapFree: -1 kB\n",
		"MemTotal: 1000 kB\nMemAvailable: NaN kB\n",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte(meminfo), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := readSwap(context.Background(), dir, func(context.Context) (*mem.VirtualMemoryStat, error) {
			t.Errorf("meminfo %q reached gopsutil", meminfo)
			return nil, errors.New("not to be called")
		})
		if err == nil || !strings.Contains(err.Error(), "invalid syntax") {
			t.Errorf("meminfo %q: %+v, %v; want the hand parser's invalid syntax", meminfo, s, err)
		}
	}
}

// TestGopsutilNeverOpensWhatIsNoFile: a meminfo that is a FIFO (on which
// gopsutil's plain open would wait for ever), a character device (it would
// read /dev/zero without end) or a directory is refused by procfile before
// gopsutil is called.
func TestGopsutilNeverOpensWhatIsNoFile(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		make       func(path string) error
	}{
		{"FIFO", "not a regular file (a FIFO)", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"/dev/zero", "not a regular file (a character device)", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"/dev/null", "not a regular file (a character device)", func(p string) error { return os.Symlink("/dev/null", p) }},
		{"directory", "not a regular file (a directory)", func(p string) error { return os.Mkdir(p, 0o755) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tc.make(filepath.Join(dir, "meminfo")); err != nil {
				t.Fatal(err)
			}
			var asked atomic.Bool
			spy := func(ctx context.Context) (*mem.VirtualMemoryStat, error) {
				asked.Store(true)
				return nil, errors.New("gopsutil must not be asked")
			}
			done := make(chan error, 1)
			go func() {
				_, err := readSwap(context.Background(), dir, spy)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want %q", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the read blocked")
			}
			if asked.Load() {
				t.Error("gopsutil was asked to read it")
			}
		})
	}
}
