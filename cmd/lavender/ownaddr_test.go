package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestWritesFromThisHostsOwnAddress: a program on the box that connects to
// the host's own address, as Alertmanager configured with
// http://$(hostname):9877/webhook does, arrives from that address, not
// from loopback; by default it may write. The exporter listens on that
// address alone for this test.
func TestWritesFromThisHostsOwnAddress(t *testing.T) {
	t.Parallel()
	own := ownAddress(t)
	logDir := filepath.Join(t.TempDir(), "logs")
	exporter := startInProcess(t, nil, "exporter", "--web.listen-address="+net.JoinHostPort(own, "0"), "--runlog.dir", logDir,
		"--path.procfs", testkit.SwapProcfs(t, 0.10))
	base := exporter.base
	for _, host := range []string{strings.TrimPrefix(base, "http://"), app.Hostname()} {
		code, body := hostWrite(t, base, host, "/api/v1/heartbeat", `{"phase":"Train","event":"start"}`, map[string]string{"Content-Type": "application/json"})
		if code != 200 {
			t.Errorf("heartbeat from this host's address %s under Host %s = %d %q, want 200", own, host, code, body)
		}
	}
}

// ownAddress is one of this host's addresses besides loopback.
func ownAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("this host has no IPv4 address besides loopback")
	return ""
}
