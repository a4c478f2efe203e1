package targetfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func TestList(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.bark.env", "a.bark.env", "a.ntfy.env", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := List(dir, "bark", ".bark.env"); err != nil || !slices.Equal(got, []string{"a.bark.env", "b.bark.env"}) {
		t.Errorf("List = %q, %v", got, err)
	}
	var de *DirError
	if _, err := List(filepath.Join(dir, "missing"), "ntfy", ".ntfy.env"); !errors.As(err, &de) || de.Channel != "ntfy" || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing dir: %v", err)
	}
	if _, err := List(filepath.Join(dir, "notes.txt"), "bark", ".bark.env"); err == nil || err.Error() != "bark config dir: "+filepath.Join(dir, "notes.txt")+" is not a directory" {
		t.Errorf("a file as the dir: %v", err)
	}
}

// TestRead: a regular file is read with its mode; a FIFO is refused at
// once (nil data, no wait), an empty file is empty but not nil, and a file
// over the limit is an error.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t")
	if err := os.WriteFile(path, []byte("https://h/$0\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if data, perm, err := Read(path, 64); err != nil || string(data) != "https://h/$0\n" || perm != 0o640 {
		t.Errorf("Read = %q, %o, %v", data, perm, err)
	}
	if _, _, err := Read(path, 4); err == nil {
		t.Error("a file over the limit was read")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if data, _, err := Read(empty, 64); err != nil || data == nil || len(data) != 0 {
		t.Errorf("an empty file: %q, %v", data, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if data, _, err := Read(fifo, 64); err != nil || data != nil {
		t.Errorf("a FIFO: %q, %v", data, err)
	}
}

func TestReport(t *testing.T) {
	got := Report([]Line{{"b.env", 1, "b.env:1 ok"}, {"a.env", 3, "a.env:3 ok"}}, []*LineError{{"a.env", 2, "bad"}})
	if want := []string{"a.env:2: bad", "a.env:3 ok", "b.env:1 ok"}; !slices.Equal(got, want) {
		t.Errorf("Report = %q, want %q", got, want)
	}
}

func TestInClearTo(t *testing.T) {
	for url, want := range map[string]string{
		"http://ntfy.lan/alerts":              "ntfy.lan",
		"HTTP://192.168.1.5:8080/KEY/$0":      "192.168.1.5:8080",
		"http://[2001:db8::1]:80/t":           "[2001:db8::1]:80",
		"https://ntfy.sh/alerts":              "",
		"http://127.0.0.1:8080/KEY/$0":        "",
		"http://127.0.0.53/t":                 "",
		"http://[::1]:2586/t":                 "",
		"http://localhost:2586/t":             "",
		"http://ntfy.localhost/t":             "",
		"http://localhost.example.com/t":      "localhost.example.com",
		"http://user@127.0.0.1.example.com/t": "127.0.0.1.example.com",
		"%zz":                                 "",
		"http:///no-host":                     "",
	} {
		if got := InClearTo(url); got != want {
			t.Errorf("InClearTo(%q) = %q, want %q", url, got, want)
		}
	}
}
