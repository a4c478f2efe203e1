package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// inProcess is a serving command (serve, exporter or bridge), parsed from
// its flags, run inside the test binary, with its log at debug level as
// --log.level=debug gives it. It is how this package's tests run a
// command: what needs a process of its own (signals, kill -9, exit
// codes, memory, what the built binary prints) starts it, in package e2e,
// and nothing here does.
type inProcess struct {
	base   string // http://127.0.0.1:port
	client *http.Client
	logs   *testkit.SyncBuffer
	stop   func() error // ends the command; its error, or nil
}

// startInProcess runs args (the command name first) on 127.0.0.1:0, or
// the --web.listen-address args give, until the test ends, and returns once it is ready. clock is the command's
// clock (nil: time.Now), for a test that moves time on.
func startInProcess(t testing.TB, clock func() time.Time, args ...string) *inProcess {
	t.Helper()
	return startInProcessWith(t, Globals{Clock: clock}, args...)
}

// startInProcessWith is startInProcess with the Globals a test sets (the
// clock, the statfs); the logger and the streams are its own.
func startInProcessWith(t testing.TB, base Globals, args ...string) *inProcess {
	t.Helper()
	p := &inProcess{client: &http.Client{Timeout: 30 * time.Second}, logs: &testkit.SyncBuffer{}}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--web.listen-address") }) {
		args = append(args, "--web.listen-address=127.0.0.1:0")
	}
	cli := parseCLI(t, args...)
	logger, err := app.NewLogger("debug", "logfmt", p.logs)
	if err != nil {
		t.Fatal(err)
	}
	g := &Globals{Logger: logger, Stdout: p.logs, Stderr: p.logs, Clock: base.Clock, Statfs: base.Statfs}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan []net.Addr, 1)
	ready := make(chan struct{})
	done := make(chan error, 1)
	onListen := func(a []net.Addr) { addrs <- a }
	go func() {
		switch args[0] {
		case "serve":
			done <- cli.Serve.serve(ctx, g, onListen, func() { close(ready) })
		case "exporter":
			close(ready)
			done <- cli.Exporter.serve(ctx, g, onListen)
		case "bridge":
			close(ready)
			done <- cli.Bridge.serve(ctx, g, onListen)
		default:
			done <- fmt.Errorf("startInProcess: no serving command %q", args[0])
		}
	}()
	select {
	case a := <-addrs:
		p.base = "http://" + a[0].String()
	case err := <-done:
		cancel()
		t.Fatalf("%s stopped before listening: %v\n%s", args[0], err, p.logs)
	}
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("%s stopped before ready: %v\n%s", args[0], err, p.logs)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("%s not ready within 30s", args[0])
	}
	var once sync.Once
	var stopErr error
	p.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = errors.New("did not stop within 30s")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("%s: %v", args[0], err)
		}
	})
	return p
}
