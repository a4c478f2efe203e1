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

	"github.com/lavender-ml/lavender/internal/procfile"
)

// copyProcfs copies the swap54 fake procfs into a fresh dir.
func copyProcfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/procfs/swap54")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestProcfsFilesThatAreNoFiles: meminfo, vmstat or pressure/memory
// replaced by a FIFO (which a plain open waits on for ever), by a symlink
// to /dev/zero (which a growing read fills memory with) or by a file over
// 1 MiB: each read fails at once with an error naming the file and what it
// is, and the collector counts it as a read error of that file.
func TestProcfsFilesThatAreNoFiles(t *testing.T) {
	for _, file := range []string{"meminfo", "vmstat", pressureFile} {
		for _, fault := range []struct {
			name, want string
			make       func(t *testing.T, path string)
		}{
			{"FIFO", "not a regular file (a FIFO)", func(t *testing.T, path string) {
				if err := syscall.Mkfifo(path, 0o644); err != nil {
					t.Fatal(err)
				}
			}},
			{"/dev/zero", "not a regular file (a character device)", func(t *testing.T, path string) {
				if err := os.Symlink("/dev/zero", path); err != nil {
					t.Fatal(err)
				}
			}},
			{"2 MiB", "file too large", func(t *testing.T, path string) {
				if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 2<<20), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(file+" "+fault.name, func(t *testing.T) {
				dir := copyProcfs(t)
				path := filepath.Join(dir, file)
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				fault.make(t, path)
				done := make(chan error, 1)
				go func() {
					var err error
					switch file {
					case "meminfo":
						_, err = ReadSwap(context.Background(), dir)
					case "vmstat":
						_, err = readSwapActivity(dir)
					default:
						_, err = ReadPressure(dir)
					}
					done <- err
				}()
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), fault.want) || !strings.Contains(err.Error(), path) {
						t.Errorf("read = %v, want an error naming %s and %q", err, path, fault.want)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the read blocked")
				}
				c := newSwapCollector(dir, testPageSize, slog.New(slog.DiscardHandler))
				testutil.CollectAndCount(c)
				testutil.CollectAndCount(c)
				counter := map[string]*atomic.Uint64{"meminfo": &c.meminfoErrors, "vmstat": &c.vmstatErrors, pressureFile: &c.pressureErrors}[file]
				if got := counter.Load(); got != 2 {
					t.Errorf("two scrapes counted %d %s read errors, want 2", got, file)
				}
			})
		}
	}
}

// TestReadSwapWithoutMemAvailable: a kernel before 3.14 has no
// MemAvailable line. gopsutil, which read meminfo before, then read
// <procfs>/zoneinfo and indexed each line's first field, so a blank line
// there panicked the scrape. Now the ratio is (MemFree + Buffers +
// Cached) / MemTotal and zoneinfo is not read.
func TestReadSwapWithoutMemAvailable(t *testing.T) {
	dir := t.TempDir()
	meminfo := "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 150 kB\n" +
		"Active(file): 10 kB\nInactive(file): 10 kB\nSReclaimable: 10 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\nbogus\n\n"
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte(meminfo), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zoneinfo"), []byte("Node 0\n\nlow 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ReadSwap(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(s.MemAvailableRatio-0.3) > 1e-9 || s.TotalBytes != 0 {
		t.Errorf("reading %+v, want MemAvailableRatio 0.3 and no swap", s)
	}
}

// The reads share procfile's limit, so a file the limit lets through is
// read whole and one past it is refused.
func TestProcfsLimitIsProcfiles(t *testing.T) {
	dir := copyProcfs(t)
	data, err := os.ReadFile(filepath.Join(dir, "vmstat"))
	if err != nil {
		t.Fatal(err)
	}
	padded := append(data, bytes.Repeat([]byte("x 1\n"), (procfile.MaxBytes-len(data))/4)...)
	if err := os.WriteFile(filepath.Join(dir, "vmstat"), padded, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readSwapActivity(dir); err != nil {
		t.Errorf("vmstat of %d bytes (limit %d): %v", len(padded), procfile.MaxBytes, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vmstat"), append(padded, "xxxxx 1\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readSwapActivity(dir); !errors.Is(err, procfile.ErrTooLarge) {
		t.Errorf("vmstat over the limit: %v, want ErrTooLarge", err)
	}
}
