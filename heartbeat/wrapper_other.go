//go:build !linux

package heartbeat

import (
	"log/slog"
	"os"
	"os/exec"
	"syscall"
)

// Elsewhere than on Linux the command runs in the wrapper's process group,
// and the wrapper passes on the SIGINT and SIGTERM it receives: a signal
// sent to the whole group (Ctrl-C) reaches the command twice. See
// wrapper_linux.go for how Linux avoids that.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// ControllingTerminal returns nil: the wrapper manages no terminal here.
func ControllingTerminal() *os.File { return nil }

type job struct{}

func newJob(*os.File, *slog.Logger) *job { return &job{} }
func (*job) prepare(*exec.Cmd)           {}
func (*job) lockThread() func()          { return func() {} }
func (*job) started(int)                 {}
func (*job) watchStops(<-chan struct{})  {}
func (*job) exited()                     {}
