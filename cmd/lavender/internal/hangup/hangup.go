// Package hangup keeps a SIGHUP from killing lavender while it starts.
//
// Go's default for SIGHUP is to exit (status 129), and systemd's reload or a
// log rotator can send one at any moment, including the first milliseconds
// of a start, before `serve` or `bridge` has registered its reload handler.
// This package registers for SIGHUP in its init. It imports nothing but
// os/signal and syscall, so it is initialised as soon as os/signal is, long
// before the heavy dependencies (kong, net/http, the Prometheus client) and
// package main: Go initialises packages in import-path order as soon as
// their own imports are ready. Only the Go runtime's own start and a few
// basic packages come before it; no Go code can catch a signal earlier.
//
// A caught signal is not acted on here: a command that reloads on SIGHUP
// asks Arrived once its handler is in place and reloads if one came
// during the start. For every other command a SIGHUP is ignored.
package hangup

import (
	"os"
	"os/signal"
	"syscall"
)

var early = make(chan os.Signal, 1)

func init() {
	// Notify, not signal.Ignore: an ignored signal stays ignored in the
	// programs lavender starts (`phase run`), and a later Notify could
	// not tell a reload from a hang-up at start.
	signal.Notify(early, syscall.SIGHUP)
}

// Arrived reports whether a SIGHUP has come since the process started (or
// since the last call), and forgets it.
func Arrived() bool {
	select {
	case <-early:
		return true
	default:
		return false
	}
}
