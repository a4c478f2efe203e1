package testkit

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// PrivateDir writes files (name → content), mode 0600, into a fresh
// directory named name, mode 0700, and returns it: a config dir of target
// files and token files, as a user keeps one.
func PrivateDir(t testing.TB, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	WritePrivate(t, dir, files)
	return dir
}

// WritePrivate writes more files, mode 0600 (a file already there is made
// 0600 too), into dir, as a user does before a reload.
func WritePrivate(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatalf("testkit: %v", err)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatalf("testkit: %v", err)
		}
	}
}

// Hijack takes the connection of a request the server has read in full
// from its http.Server, for a stand-in that answers in ways net/http
// will not (a cut body, a reset); nil when it cannot. Anything the client
// sent after the request (a pipelined one) is dropped with it.
func Hijack(w http.ResponseWriter, r *http.Request) net.Conn {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "testkit: cannot hijack "+strconv.Quote(r.Proto), http.StatusInternalServerError)
		return nil
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return nil
	}
	return conn
}
