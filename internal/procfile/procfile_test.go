package procfile

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadRefusesWhatIsNoFile: a FIFO (with no writer, and with a writer
// that never writes), /dev/zero behind a symlink, a directory and a socket
// are refused at once, saying what they are; nothing is read from them.
func TestReadRefusesWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	heldFIFO := filepath.Join(dir, "held-fifo")
	if err := syscall.Mkfifo(heldFIFO, 0o644); err != nil {
		t.Fatal(err)
	}
	// A writer that holds the FIFO open and never writes: a blocking read
	// would wait for ever.
	w, err := os.OpenFile(heldFIFO, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for path, want := range map[string]string{
		fifo:     "not a regular file (a FIFO)",
		heldFIFO: "not a regular file (a FIFO)",
		zero:     "not a regular file (a character device)",
		dir:      "not a regular file (a directory)",
		sock:     "", // open(2) of a socket fails with ENXIO
	} {
		done := make(chan error, 1)
		go func() { _, err := Read(path, nil, MaxBytes); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Read(%s) = %v, want an error naming the file and %q", path, err, want)
			}
			if want != "" && !errors.Is(err, ErrNotRegular) {
				t.Errorf("Read(%s) = %v, want ErrNotRegular", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Read(%s) blocked", path)
		}
	}
}

func TestReadBounded(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte("x"), size), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const limit = 100 << 10
	for _, size := range []int{0, 1, 32 << 10, 32<<10 + 1, limit} {
		buf := new([]byte)
		data, err := Read(write("ok", size), buf, limit)
		if err != nil || len(data) != size {
			t.Errorf("Read of %d bytes = %d bytes, %v", size, len(data), err)
		}
		if cap(*buf) > 2*(limit+1) {
			t.Errorf("buffer grew to %d bytes for a %d-byte file", cap(*buf), size)
		}
	}
	for _, size := range []int{limit + 1, 3 * limit} {
		buf := new([]byte)
		_, err := Read(write("big", size), buf, limit)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("Read of %d bytes (limit %d) = %v, want ErrTooLarge", size, limit, err)
		}
		if cap(*buf) > 2*(limit+1) {
			t.Errorf("buffer grew to %d bytes on a %d-byte file, over twice the limit", cap(*buf), size)
		}
	}
	if _, err := Read(filepath.Join(dir, "missing"), nil, limit); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a missing file = %v, want fs.ErrNotExist", err)
	}
}

// The real procfs: its files stat as regular files of size 0.
func TestReadProc(t *testing.T) {
	for _, p := range []string{"/proc/meminfo", "/proc/vmstat", "/proc/self/stat"} {
		data, err := Read(p, nil, MaxBytes)
		if err != nil || len(data) == 0 {
			t.Errorf("Read(%s) = %d bytes, %v", p, len(data), err)
		}
	}
	// A buffer reused across reads, as the collectors reuse theirs.
	buf := new([]byte)
	for range 3 {
		if data, err := Read("/proc/meminfo", buf, MaxBytes); err != nil || !bytes.HasPrefix(data, []byte("MemTotal:")) {
			t.Fatalf("Read(/proc/meminfo) = %q, %v", data, err)
		}
	}
}
