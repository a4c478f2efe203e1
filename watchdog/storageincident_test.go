package watchdog

import (
	"fmt"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/kmsg"
)

// realIncident parses a disk failure as the kernel logged it (ext4 on a
// USB disk that went away, github.com/luxonis/depthai-python/issues/532):
// ext4, jbd2, the page cache and the SCSI disk each report it their way.
func realIncident(t *testing.T, seq uint64) []KernelFault {
	t.Helper()
	var p kmsg.Parser
	var out []KernelFault
	for _, text := range []string{
		"EXT4-fs error (device sda1) in ext4_writepages:2921: Journal has aborted",
		"Buffer I/O error on dev sda1, logical block 0, lost sync page write",
		"EXT4-fs (sda1): I/O error while writing superblock",
		"EXT4-fs warning (device sda1): ext4_end_bio:309: I/O error 10 writing to inode 17 (offset 8388608 size 8388608 starting block 36864)",
		"JBD2: Detected IO errors while flushing file data on sda1-8",
		"sd 0:0:0:0: [sda] Synchronizing SCSI cache",
		"sd 0:0:0:0: [sda] Synchronize Cache(10) failed: Result: hostbyte=DID_ERROR driverbyte=DRIVER_OK",
		"EXT4-fs error (device sda1): ext4_journal_check_start:61: Detected aborted journal",
		"EXT4-fs (sda1): Remounting filesystem read-only",
	} {
		seq++
		rec, ok := kmsg.ParseRecord([]byte(fmt.Sprintf("3,%d,%d,-;%s", seq, seq, text)))
		if !ok {
			t.Fatalf("not a record: %q", text)
		}
		if f, ok := p.Parse(rec); ok {
			out = append(out, KernelFault{Fault: f, Phase: "Pretrain 1/3"})
		}
	}
	return out
}

// TestStorageIncidentIsOnePush: the records of one disk failure, read in
// one batch, are one push naming the filesystem's device (the journal's
// "sda1-8" is sda1's), and the same failure logged again within the
// window pushes nothing more: its records are counted.
func TestStorageIncidentIsOnePush(t *testing.T) {
	rules, p, wd := runEventWatchdog(t)

	wd.Faults(realIncident(t, 100))
	var got []Alert
	select {
	case got = <-p.pushes:
	case <-time.After(20 * time.Second):
		t.Fatal("no push for the incident")
	}
	kinds := map[kmsg.StorageKind]bool{}
	for _, a := range got {
		if a.Rule != RuleDisk || a.Fault.Device != "sda1" {
			t.Errorf("alert of the incident: rule %s device %q", a.Rule, a.Fault.Device)
		}
		kinds[a.Fault.Storage] = true
	}
	if len(got) != 3 || !kinds[kmsg.FSError] || !kinds[kmsg.IOError] || !kinds[kmsg.ReadOnly] {
		t.Errorf("the push holds %d alerts of kinds %v; want fs_error, io_error and read_only of sda1", len(got), kinds)
	}

	// The same records again, before the window ends, go to the disk
	// rule as repeats: nothing to push.
	var disk *KernelRule
	for _, r := range rules {
		if kr, ok := r.(*KernelRule); ok && kr.Name() == RuleDisk {
			disk = kr
		}
	}
	now := time.Now()
	for _, f := range realIncident(t, 200) {
		if alerts := disk.Fault(f, now); len(alerts) != 0 {
			t.Errorf("a repeat of %s %s pushed: %+v", f.Device, f.Storage, alerts)
		}
	}
}
