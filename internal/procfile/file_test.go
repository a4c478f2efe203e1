package procfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestFileOnProcfsIsHeldAndFresh: a real procfs file is kept open, and each
// Read still renders it anew (the uptime moves between reads).
func TestFileOnProcfsIsHeldAndFresh(t *testing.T) {
	f := NewFile("/proc/uptime")
	first, err := f.Read(nil, MaxBytes)
	if err != nil {
		t.Skip(err)
	}
	first = bytes.Clone(first)
	if f.held == nil {
		t.Fatal("a /proc file was not held open")
	}
	fd := f.held.fd
	var second []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if second, err = f.Read(nil, MaxBytes); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			break
		}
	}
	if bytes.Equal(first, second) {
		t.Errorf("/proc/uptime read the same for 5s through a held descriptor: %q", first)
	}
	if f.held == nil || f.held.fd != fd {
		t.Errorf("descriptor not kept between reads")
	}
	// The same bytes Read gets, from the start of the file each time.
	buf := new([]byte)
	for range 3 {
		data, err := NewFile("/proc/meminfo").Read(buf, MaxBytes)
		if err != nil || !bytes.HasPrefix(data, []byte("MemTotal:")) {
			t.Fatalf("Read(/proc/meminfo) = %q, %v", data, err)
		}
	}
}

// TestFileElsewhereIsOpenedEachTime: outside procfs the path is opened and
// checked at every Read, so a file renamed over it is read, and a FIFO or
// a missing file put in its place is refused, as by Read.
func TestFileElsewhereIsOpenedEachTime(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "meminfo")
	write := func(s string) {
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	f := NewFile(path)
	write("one")
	if data, err := f.Read(nil, MaxBytes); err != nil || string(data) != "one" {
		t.Fatalf("Read = %q, %v", data, err)
	}
	if f.held != nil {
		t.Error("a file outside procfs was held open")
	}
	write("two")
	if data, err := f.Read(nil, MaxBytes); err != nil || string(data) != "two" {
		t.Errorf("after a rename: Read = %q, %v, want two", data, err)
	}
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(nil, MaxBytes); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a FIFO in its place: Read = %v, want ErrNotRegular", err)
	}
	os.Remove(path)
	if _, err := f.Read(nil, MaxBytes); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("removed: Read = %v, want not exist", err)
	}
	write("three")
	if data, err := f.Read(nil, MaxBytes); err != nil || string(data) != "three" {
		t.Errorf("back: Read = %q, %v", data, err)
	}
}

// TestFileLimit: a held file past the limit is refused and let go.
func TestFileLimit(t *testing.T) {
	f := NewFile("/proc/self/maps")
	if _, err := f.Read(nil, MaxBytes); err != nil {
		t.Skip(err)
	}
	if _, err := f.Read(nil, 10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read with a 10-byte limit = %v, want ErrTooLarge", err)
	}
	if f.held != nil {
		t.Error("descriptor still held after a failed read")
	}
	if data, err := f.Read(nil, MaxBytes); err != nil || len(data) == 0 {
		t.Errorf("Read after a failure = %d bytes, %v", len(data), err)
	}
}

// TestFileConcurrent: reads of one held descriptor from many goroutines
// each get the whole file.
func TestFileConcurrent(t *testing.T) {
	f := NewFile("/proc/meminfo")
	if _, err := f.Read(nil, MaxBytes); err != nil {
		t.Skip(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			buf := new([]byte)
			for range 50 {
				data, err := f.Read(buf, MaxBytes)
				if err != nil || !bytes.HasPrefix(data, []byte("MemTotal:")) || !bytes.HasSuffix(data, []byte("\n")) {
					t.Errorf("Read = %q, %v", data, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkFileRead compares a held procfs descriptor with Read's open,
// read and close.
func BenchmarkFileRead(b *testing.B) {
	for _, path := range []string{"/proc/meminfo", "/proc/vmstat", "/proc/pressure/memory"} {
		if _, err := Read(path, nil, MaxBytes); err != nil {
			continue
		}
		buf := new([]byte)
		b.Run("Read"+path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Read(path, buf, MaxBytes); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("File"+path, func(b *testing.B) {
			f := NewFile(path)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Read(buf, MaxBytes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
