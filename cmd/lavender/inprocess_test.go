package main

import (
	"context"
	"net"
	"testing"
	"time"
)

// startInProcess runs a serving command's serve method until the test
// ends, and returns its base URL once it listens. serve gets the context
// the cleanup cancels and the onListen callback.
func startInProcess(t *testing.T, name string, serve func(ctx context.Context, onListen func([]net.Addr)) error) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan []net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, func(a []net.Addr) { addrs <- a }) }()
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a[0].String()
	case err := <-done:
		cancel()
		t.Fatalf("%s stopped before listening: %v", name, err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("%s did not stop", name)
		}
	})
	return base
}
