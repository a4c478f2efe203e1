package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/lavender-ml/lavender/internal/procfile"
	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/runlog"
)

// KernelLogPositionFileName is the file in the logs dir, beside
// watchdog-state.json, where serve keeps how far it read the kernel log
// device: the last record's sequence number and the boot it belongs to. A
// restart on the same boot reads on from the next record, so a fault
// logged while serve was down is pushed; another boot starts at the end.
const KernelLogPositionFileName = "kmsg-position.json"

const (
	kernelLogPositionVersion = 1
	// maxKernelLogPositionBytes bounds the read: the file is some 100
	// bytes; anything larger was not written by lavender.
	maxKernelLogPositionBytes = 4096
	// maxBootIDBytes bounds the boot id's read (a UUID and a newline).
	maxBootIDBytes = 128
)

type kernelLogPositionFile struct {
	Version int    `json:"version"`
	BootID  string `json:"boot_id"`
	Seq     uint64 `json:"seq"`
}

// kernelLogPosition keeps the position of serve's kernel log reader. A
// file that cannot be read, a damaged one (moved aside), a boot id that
// cannot be read: each is logged and never stops serve, which then starts
// at the log's end as on a first start.
type kernelLogPosition struct {
	path   string
	bootID string // this boot's; "" when unknown: nothing is saved
	logger *slog.Logger
	saved  uint64
	any    bool // saved holds what the file holds
}

// openKernelLogPosition reads the position the process before left in
// dir, and says where to start: after it when it was taken on this boot
// (procfs's boot id), else at the end.
func openKernelLogPosition(dir, procfs string, logger *slog.Logger) (*kernelLogPosition, kmsg.From) {
	p := &kernelLogPosition{path: filepath.Join(dir, KernelLogPositionFileName), logger: logger}
	if procfs == "" {
		procfs = "/proc"
	}
	id, err := procfile.Read(filepath.Join(procfs, "sys", "kernel", "random", "boot_id"), nil, maxBootIDBytes)
	if p.bootID = strings.TrimSpace(string(id)); err != nil || p.bootID == "" {
		p.bootID = ""
		logger.Warn("kernel log position not kept: the boot id cannot be read, so a restart of serve starts at the log's end", "err", err)
	}
	f, err := readKernelLogPosition(p.path)
	switch {
	case err != nil:
		logger.Warn("kernel log position damaged: reading starts at the log's end", "err", err)
	case f == nil || p.bootID == "":
	case f.BootID != p.bootID:
		logger.Info("kernel log position is of another boot: reading starts at the log's end", "boot_id", f.BootID)
	default:
		p.saved, p.any = f.Seq, true
		return p, kmsg.From{Resume: true, Seq: f.Seq}
	}
	return p, kmsg.From{}
}

func readKernelLogPosition(path string) (*kernelLogPositionFile, error) {
	data, err := runlog.ReadRegularFile(path, maxKernelLogPositionBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, runlog.ErrNotRegular), errors.Is(err, runlog.ErrTooLarge):
		return nil, moveKernelLogPositionAside(path, err)
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var f kernelLogPositionFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, moveKernelLogPositionAside(path, err)
	}
	if f.Version != kernelLogPositionVersion {
		return nil, moveKernelLogPositionAside(path, fmt.Errorf("version %d, want %d", f.Version, kernelLogPositionVersion))
	}
	if f.BootID == "" {
		return nil, moveKernelLogPositionAside(path, errors.New("no boot id"))
	}
	return &f, nil
}

// moveKernelLogPositionAside keeps a damaged file under a numbered name.
func moveKernelLogPositionAside(path string, damage error) error {
	aside, err := runlog.MoveAside(path)
	if err != nil {
		return fmt.Errorf("read %s: damaged: %w; not moved aside: %w", path, damage, err)
	}
	return fmt.Errorf("read %s: damaged: %w (moved to %s)", path, damage, filepath.Base(aside))
}

// save writes the reader's position when it moved, atomically (temp
// file, fsync, rename, fsync of the dir), as the watchdog's state is
// written. A failed save is logged; the next one tries again.
func (p *kernelLogPosition) save(r *kmsg.Reader) {
	if p == nil || p.bootID == "" || r == nil {
		return
	}
	seq, ok := r.Position()
	if !ok || p.any && seq == p.saved {
		return
	}
	data, err := json.Marshal(kernelLogPositionFile{Version: kernelLogPositionVersion, BootID: p.bootID, Seq: seq})
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p.path), 0o755)
	}
	if err == nil {
		err = runlog.WriteFileAtomic(p.path, append(data, '\n'))
	}
	if err != nil {
		p.logger.Error("kernel log position not saved: a restart of serve may miss or repeat faults", "err", err)
		return
	}
	p.saved, p.any = seq, true
}

// onResume logs what reading on from the saved position found.
func (p *kernelLogPosition) onResume(x kmsg.Resumed) {
	switch {
	case x.Ahead:
		p.logger.Warn("kernel log position is past the log's last record: reading from here on", "position", x.After)
	case x.Lost > 0:
		p.logger.Warn("kernel log records were lost while serve was down: the kernel overwrote them before they could be read; GPU and storage faults among them are unseen",
			"position", x.After, "lost", x.Lost)
	default:
		p.logger.Info("kernel log read on from where the last run of serve stopped", "position", x.After)
	}
}
