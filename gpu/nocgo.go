//go:build !cgo

package gpu

import "context"

// Reader is NVML's reader; a build without cgo cannot load NVML, so this
// one only says so.
type Reader struct{}

// Open returns ErrNoCgo: this build has no GPU telemetry.
func Open(Options) (*Reader, error) { return nil, ErrNoCgo }

// Snapshot answers ErrNoCgo.
func (*Reader) Snapshot() Snapshot { return Snapshot{Err: ErrNoCgo} }

// WatchXids answers ErrNoCgo.
func (*Reader) WatchXids(context.Context, func(XidEvent)) (*XidWatch, error) { return nil, ErrNoCgo }

// GPUs is 0: no GPU is read.
func (*Reader) GPUs() int { return 0 }

// Close does nothing.
func (*Reader) Close() error { return nil }
