package main

import (
	"net"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/cmd/lavender/internal/hangup"
)

// env is what app is given beside the options: the logger and the clock
// and statfs tests replace, SIGHUPs taken before the command started, and
// the tests' hooks.
func (g *Globals) env(onListen func([]net.Addr), onReady func()) app.Env {
	return app.Env{
		Logger:        g.Logger,
		Clock:         g.Clock,
		Statfs:        g.Statfs,
		HangupArrived: hangup.Arrived,
		OnListen:      onListen,
		OnReady:       onReady,
	}
}

// runlogOptions are the run-log flags as app takes them.
func (f runlogFlags) runlogOptions() app.RunlogOptions {
	return app.RunlogOptions{Dir: f.Dir, MaxBytes: f.MaxBytes}
}

// hostOptions are the host flags as app takes them: procfs, the status
// page's step, the kernel log. The fixed disks (diskFlags.paths) are the
// command's to add once app has checked these.
func hostOptions(p procfsFlags, k kernelLogFlags, g gpuFlags) app.HostOptions {
	return app.HostOptions{ProcFS: p.ProcFS, HistoryStep: p.HistoryStep, KmsgPath: k.KmsgPath, GPU: g.GPU}
}

// gpuFlags turn NVML off, for a host where it should not be loaded.
type gpuFlags struct {
	GPU bool `name:"gpu" default:"true" negatable:"" help:"Read NVIDIA GPUs through NVML (builds with cgo, hosts with the driver): metrics, the status page's GPUs, Xid events beside the kernel log's. --no-gpu: never load NVML."`
}
