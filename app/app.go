// Package app wires lavender's serving commands from plain options: what
// each of serve, exporter and bridge builds, in which order it starts and
// stops, and the host reader that feeds serve's watchdog. It also runs the
// client commands (send, check, runlog, phase), checks the options before
// a command starts (naming the flags), and gives the flags' defaults.
// cmd/lavender parses flags into these options and calls RunServe,
// RunExporter, RunBridge and the others; nothing else imports this
// package.
package app

import (
	"log/slog"
	"net"
	"time"

	"github.com/lavender-ml/lavender/diskguard"
	"github.com/lavender-ml/lavender/runlog"
)

// Env is what a command is given beside its options: where it logs, and
// the clock and statfs that tests replace.
type Env struct {
	Logger *slog.Logger
	// Clock is serve's and the exporter's time source: heartbeat stamps and
	// the watchdog's polls read it. nil: time.Now.
	Clock func() time.Time
	// Statfs reads the watched filesystems; nil: the real statfs.
	Statfs diskguard.StatFunc
	// HangupArrived reports whether a SIGHUP came while the process was
	// starting (cmd takes them from the first instant); nil: none did.
	HangupArrived func() bool
	// OnListen learns the bound addresses; OnReady is called once the
	// command serves and is ready. Either may be nil.
	OnListen func([]net.Addr)
	OnReady  func()
}

// now is the command's clock.
func (e Env) now() func() time.Time {
	if e.Clock == nil {
		return time.Now
	}
	return e.Clock
}

// WebOptions are exporter-toolkit's web flags and the write guard's.
type WebOptions struct {
	ListenAddresses []string
	SystemdSocket   bool
	ConfigFile      string // exporter-toolkit's web config (TLS, basic auth)
	WriteAllow      []string
	AllowedHosts    []string
	ExternalURL     string // where users reach lavender; "" for the exporter
}

// RunlogOptions locate and cap the run logs.
type RunlogOptions struct {
	Dir      string
	MaxBytes int
}

func (o RunlogOptions) plain() runlog.Options {
	return runlog.Options{Dir: o.Dir, MaxBytes: o.MaxBytes}
}

// logged is o with the logger that hears about a damaged run log moved
// aside.
func (o RunlogOptions) logged(logger *slog.Logger) runlog.Options {
	r := o.plain()
	r.Logger = logger
	return r
}

// LogsDir is the run-log dir o names, runlog's default for "".
func (o RunlogOptions) LogsDir() string {
	if o.Dir == "" {
		return runlog.DefaultDir
	}
	return o.Dir
}

// HostOptions point the readers at the host's procfs and set the status
// page's sampling.
type HostOptions struct {
	ProcFS      string
	HistoryStep time.Duration // between points of the status page's chart
	KmsgPath    string        // the kernel log; "": none
	// DiskPaths are the fixed filesystems to watch, absolute; the phases'
	// directories are watched too.
	DiskPaths []string
	// GPU reads NVIDIA GPUs through NVML where the build and the host
	// allow (cgo, the driver); false: not even tried.
	GPU bool
}
