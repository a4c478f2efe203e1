package testkit

import (
	"fmt"
	"syscall"
	"testing"
)

// RefusingAddr is a loopback address that refuses every connection for
// the rest of the test: a socket bound to it, never listening, holds the
// port, so no other test or process on the machine can take it meanwhile
// (a port merely found free and closed again can be, and then the
// "connection refused" a test counts on becomes something else).
func RefusingAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("testkit: socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("testkit: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("testkit: getsockname: %v", err)
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("testkit: getsockname gave %T", sa)
	}
	return fmt.Sprintf("127.0.0.1:%d", in.Port)
}
