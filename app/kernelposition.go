package app

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lavender-ml/lavender/internal/procfile"
	"github.com/lavender-ml/lavender/kmsg"
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

	mu      sync.Mutex
	saved   uint64
	any     bool        // saved holds what the file holds
	lastTry time.Time   // the last save tried
	timer   *time.Timer // a save put off (saveSoon); nil: none
	stopped bool        // saveNow at the stop: no save is put off any more
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
	// At the end, knowing where: what is logged while this run is down is
	// read by the next.
	return p, kmsg.From{Track: p.bootID != ""}
}

func readKernelLogPosition(path string) (*kernelLogPositionFile, error) {
	var f kernelLogPositionFile
	found, err := readStateFile(path, maxKernelLogPositionBytes, &f, func() error {
		switch {
		case f.Version != kernelLogPositionVersion:
			return fmt.Errorf("version %d, want %d", f.Version, kernelLogPositionVersion)
		case f.BootID == "":
			return errors.New("no boot id")
		}
		return nil
	})
	if !found {
		return nil, err
	}
	return &f, nil
}

// saveSoon saves the reader's position within positionEvery of the last
// save tried: now if that is as old, else by a timer, which one save
// serves however often the position moves meanwhile.
func (p *kernelLogPosition) saveSoon(r *kmsg.Reader) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil || p.stopped {
		return
	}
	if wait := positionEvery - time.Since(p.lastTry); wait > 0 {
		p.saveAfterLocked(r, wait)
		return
	}
	p.saveLocked(r)
}

// saveNow saves the reader's position at once (at the start). With stop,
// it is the last save: nothing is put off any more.
func (p *kernelLogPosition) saveNow(r *kmsg.Reader, stop bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.stopped = p.stopped || stop
	p.saveLocked(r)
}

// saveAfterLocked puts a save off by wait.
func (p *kernelLogPosition) saveAfterLocked(r *kmsg.Reader, wait time.Duration) {
	p.timer = time.AfterFunc(wait, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.timer = nil
		if !p.stopped {
			p.saveLocked(r)
		}
	})
}

// saveLocked writes the reader's position when it moved, atomically (temp
// file, fsync, rename, fsync of the dir), as the watchdog's state is
// written. A failed save is logged and tried again after positionEvery,
// so a position the log no longer moves past still reaches the file.
func (p *kernelLogPosition) saveLocked(r *kmsg.Reader) {
	if p.bootID == "" || r == nil {
		return
	}
	seq, ok := r.Position()
	if !ok || p.any && seq == p.saved {
		return
	}
	p.lastTry = time.Now()
	if err := writeStateFile(p.path, kernelLogPositionFile{Version: kernelLogPositionVersion, BootID: p.bootID, Seq: seq}); err != nil {
		p.logger.Error("kernel log position not saved: a restart of serve may miss or repeat faults", "err", err)
		if !p.stopped {
			p.saveAfterLocked(r, positionEvery)
		}
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
