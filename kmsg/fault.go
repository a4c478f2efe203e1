package kmsg

import (
	"strconv"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
)

// Kind is what a fault is.
type Kind string

const (
	OOMKill      Kind = "oom_kill"       // the OOM killer killed a process
	Xid          Kind = "xid"            // the NVIDIA driver reported an Xid error
	FallenOffBus Kind = "fallen_off_bus" // a GPU stopped answering on PCIe, reported without an Xid
	Storage      Kind = "storage"        // a filesystem, block device or NVMe controller failed
)

// StorageKind says which storage fault a record reports; it is the kind
// label of lavender_storage_errors_total, so the set is closed.
type StorageKind string

const (
	FSError     StorageKind = "fs_error"     // EXT4-fs error, a jbd2 journal abort, BTRFS error or csum failure, XFS corruption, CRC, metadata I/O or log recovery error
	ReadOnly    StorageKind = "read_only"    // the filesystem was remounted read-only (ext4) or forced read-only (btrfs)
	Shutdown    StorageKind = "shutdown"     // XFS shut the filesystem down
	IOError     StorageKind = "io_error"     // the block layer failed a request, "Buffer I/O error", ext4 or jbd2 write errors, a SCSI medium or hardware error or failed command
	NVMeTimeout StorageKind = "nvme_timeout" // an NVMe command timed out
	NVMeReset   StorageKind = "nvme_reset"   // an NVMe controller is being reset or was removed
	NVMeDown    StorageKind = "nvme_down"    // "controller is down; will reset", or an NVMe namespace's capacity dropped to 0
)

// StorageKinds lists every StorageKind, in a fixed order.
var StorageKinds = []StorageKind{FSError, ReadOnly, Shutdown, IOError, NVMeTimeout, NVMeReset, NVMeDown}

// Fault is one fault the kernel log reported.
type Fault struct {
	Kind Kind
	Seq  uint64 // the record's sequence number
	Usec uint64 // the record's time, µs since boot

	// PID and Name are the process the record names: the OOM victim, or
	// the process an Xid hit (0 and "" when the driver did not say, as
	// older drivers and pid='<unknown>' do).
	PID  int
	Name string

	// GPU is the GPU's PCI address as the Xid prints it, "0000:3b:00"
	// (domain:bus:device, lower case): the fallen-off-the-bus forms that
	// add the function (".0") are cut to it, so one GPU has one name.
	GPU string
	// Instance is the MIG instance an Xid names ("GPU-I:02",
	// "GPU-I:02 GPU-CI:01"), "" without MIG.
	Instance string
	Xid      int // the Xid number; 0 for other kinds

	Device  string      // storage: the device the record names, "nvme1n1p1", "sda", "nvme0"
	Storage StorageKind // storage: which fault

	// Message is the record's text after what the fields above hold (the
	// driver's description of the Xid, the filesystem's complaint), cut
	// to MaxMessage bytes.
	Message string
}

// MaxMessage bounds Fault.Message: enough for any push, never a whole
// flood's worth of text kept per fault.
const MaxMessage = 200

// FallenOff reports whether the fault says a GPU fell off the bus: Xid 79
// or the driver's message without an Xid.
func (f Fault) FallenOff() bool {
	return f.Kind == FallenOffBus || (f.Kind == Xid && f.Xid == XidFallenOffBus)
}

// EchoWindow: the driver reports one lost GPU in several records (Xid 79,
// then "GPU has fallen off the bus" without an Xid) within moments; a
// record of the other form that soon after is the same report, not a
// repeat.
const EchoWindow = 5 * time.Second

// Echoes reports whether f says again, the other way, the GPU loss that
// prev reported: both fall off the bus, one as Xid 79 and one without an
// Xid, for the same GPU, f within EchoWindow after prev.
func (f Fault) Echoes(prev Fault) bool {
	return f.FallenOff() && prev.FallenOff() && f.Kind != prev.Kind && f.GPU == prev.GPU &&
		f.Usec >= prev.Usec && f.Usec-prev.Usec < uint64(EchoWindow/time.Microsecond)
}

// The driver's records (open-gpu-kernel-modules, nvErrorLog and nv.c, and
// older proprietary drivers):
//
//	NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.
//	NVRM: Xid (PCI:0000:86:00 GPU-I:02): 94, pid=4242, name=python3, Contained ECC error.
//	NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception …
//	NVRM: Xid (0000:03:00): 48, An uncorrectable double bit error (DBE) has been detected …
//	NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.
//	NVRM: GPU at 0000:01:00.0 has fallen off the bus.
//	NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:1db6) installed in this system has fallen off the bus …
var (
	xidRecord = lazyregexp.New(`^NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-9A-Fa-f])?((?: GPU-C?I:[0-9A-Fa-f]+)*)\): (\d{1,4}),\s*(.*)$`)
	xidPID    = lazyregexp.New(`^pid=('?<unknown>'?|\d+), name=([^,]*), ?(.*)$`)
	gpuLost   = lazyregexp.New(`^NVRM: GPU (?:at )?(?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-9A-Fa-f])?:? .*fallen off the bus`)
	// gpuLostRest is the last line of "The NVIDIA GPU <addr>", printed as
	// a record of its own (with or without the NVRM prefix); nothing but
	// its start is matched, so no other record that mentions the words
	// can stand for it.
	gpuLostRest = lazyregexp.New(`^(?:NVRM: )?fallen off the bus and is not responding to commands`)
	gpuHeader   = lazyregexp.New(`^NVRM: The NVIDIA GPU ([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-9A-Fa-f])?`)
)

// The OOM killer's records for a kill (mm/oom_kill.c), the only records
// an OOM victim is taken from, each matched whole from its first byte:
//
//	oom-kill:constraint=CONSTRAINT_NONE,…,task_memcg=/,task=python3,pid=4242,uid=1000
//	Out of memory: Killed process 4242 (python3) total-vm:9000000kB, anon-rss:… (since 5.1)
//	Memory cgroup out of memory: Killed process 4242 (python3) total-vm:…
//	Out of memory (oom_kill_allocating_task): Killed process 4242 (python3) total-vm:…
//	Killed process 4242 (python3) total-vm:9000000kB, anon-rss:… (before 5.1)
//
// The victim's name (comm, at most 15 bytes, chosen by whoever started
// the process) is read between the pid and the text the kernel prints
// after it: up to the last ") total-vm:NkB", and from the first ",task="
// up to the ",pid=N,uid=N" that ends the record. A name may hold either
// text, but the kernel's own comes after it, so the pid is always the
// kernel's. A record that
// merely contains "Killed process" (a trap or segfault line naming a file,
// an audit line) is another record and names no victim.
//
// "oom_reaper: reaped process N (comm), now anon-rss:…" names a victim
// the kill record already named, possibly long after a later kill: it is
// not taken, so it can never name a newer kill's victim.
var (
	killedProcess = lazyregexp.New(`(?s)^(?:(?:Out of memory(?: \(oom_kill_allocating_task\))?|Memory cgroup out of memory): )?Killed process (\d+) \((.*)\) total-vm:\d+kB(?:,|$)`)
	oomKillTask   = lazyregexp.New(`(?s)^oom-kill:constraint=CONSTRAINT_[A-Z_]+,.*?,task=(.*),pid=(\d+),uid=\d+$`)
)

// storageDev is a device name in parentheses: up to the ")", a space, or
// the colon before a btrfs state.
const storageDev = `([^)\s:]+)`

// Storage records, each matched from its first byte and by the words the
// kernel itself prints right after the device, never by words that may
// follow text a user chose (a process name or a file name): a record
// that begins with a process name (a segfault line) has at most 15 bytes
// of it before the kernel's "[pid]", too few to hold any of these forms.
//
// ext4 and jbd2 (fs/ext4/super.c, fs/ext4/page-io.c, fs/jbd2):
//
//	EXT4-fs error (device nvme1n1p1): ext4_find_entry:1455: inode #2: comm python3: reading directory lblock 0
//	EXT4-fs (nvme1n1p1): Remounting filesystem read-only
//	EXT4-fs warning (device dm-4): ext4_end_bio:343: I/O error 10 writing to inode 1182507 starting block 2920460)
//	EXT4-fs (sdb1): I/O error while writing superblock
//	EXT4-fs (vdb): error count since last fsck: 26
//	Aborting journal on device dm-4-8.
//	JBD2: I/O error when updating journal superblock for sda-8.
//	JBD2: Detected IO errors while flushing file data on sda1-8
//
// XFS (fs/xfs/xfs_message.c, xfs_fsops.c, xfs_log.c):
//
//	XFS (dm-0): Filesystem has been shut down due to log error (0x2).
//	XFS (dm-0): Corruption of in-memory data (0x8) detected at xfs_trans_cancel+0x13c/0x160 (fs/xfs/xfs_trans.c:1093).  Shutting down filesystem.
//	XFS (sdb): xfs_do_force_shutdown(0x1) called from line 315 of file fs/xfs/xfs_trans_buf.c.  Return address = …
//	XFS (vda4): Metadata corruption detected at xfs_buf_ioend+0x162/0x570 [xfs], xfs_inode block 0x2f88e0 …
//	XFS (vda4): Metadata CRC error detected at xfs_dquot_buf_verify_crc+0xe6/0x120 [xfs], xfs_dquot block 0x1478 …
//	XFS (sdb1): metadata I/O error in "xfs_imap_to_bp+0x5c/0xa0" at daddr 0x80 len 32 error 5
//	XFS (dm-7): log mount/recovery failed: error -5
//
// btrfs (fs/btrfs/messages.c), with the state inside the parentheses
// since 6.x ("device dm-0 state EA") or after a colon in 5.x ("device
// sda3: state E"):
//
//	BTRFS: error (device dm-0 state A) in __btrfs_unlink_inode:4144: errno=-2 No such entry
//	BTRFS error (device sde1): bdev /dev/sde1 errs: wr 1, rd 0, flush 0, corrupt 0, gen 0
//	BTRFS info (device dm-0 state EA): forced readonly
//	BTRFS warning (device vda3): csum failed root 5 ino 257 off 0 csum 0x8941f998 expected csum 0x… mirror 1
//
// "BTRFS: Transaction aborted (error -28)", the warning a transaction
// abort prints first, names no device; the kernel follows it at once with
// "BTRFS: error (device X …) in …: errno=-28" and "forced readonly", which
// name it and are the incident's faults.
//
// The block layer, SCSI disks and NVMe (block/blk-mq.c, fs/buffer.c,
// drivers/scsi, drivers/nvme/host, block/genhd.c):
//
//	Buffer I/O error on dev sda1, logical block 0, async page read
//	I/O error, dev sda, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0
//	blk_update_request: I/O error, dev sda, sector 2048 op 0x1:(WRITE) …
//	sd 4:0:0:1: [sdb] tag#0 Add. Sense: Unrecovered read error
//	sd 1:0:0:0: [sda] tag#14 UNKNOWN(0x2003) Result: hostbyte=0x00 driverbyte=0x06 cmd_age=30s
//	sd 1:0:0:0: [sda] tag#12 FAILED Result: hostbyte=DID_BAD_TARGET driverbyte=DRIVER_OK cmd_age=94s
//	nvme nvme0: I/O 123 QID 4 timeout, aborting
//	nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0x10
//	nvme2n1: detected capacity change from 800166076416 to 0
//
// "loop: Write error at byte offset 8192, length 4096." names no loop
// device either; the block layer's "I/O error, dev loop0, …" that follows
// it does.
var storageRules = []struct {
	re   *lazyregexp.Regexp
	kind StorageKind
}{
	{lazyregexp.New(`^EXT4-fs \(` + storageDev + `\): Remounting filesystem read-only`), ReadOnly},
	{lazyregexp.New(`^EXT4-fs (?:error|critical) \(device ` + storageDev + `\)`), FSError},
	{lazyregexp.New(`^EXT4-fs warning \(device ` + storageDev + `\): ext4_end_bio:\d+: I/O error -?\d+ writing to inode`), IOError},
	{lazyregexp.New(`^EXT4-fs \(` + storageDev + `\): (?:I/O error while writing superblock|previous I/O error to superblock detected)`), IOError},
	{lazyregexp.New(`^EXT4-fs \(` + storageDev + `\): error count since last fsck: [1-9]`), FSError},
	{lazyregexp.New(`^Aborting journal on device ([\w!+-]+)\.`), FSError},
	{lazyregexp.New(`^JBD2: (?:I/O error when updating journal superblock for|Error -?\d+ detected when updating journal superblock for|Detected IO errors(?: -?\d+)? while flushing file data on) ([\w!+-]+)`), IOError},
	{lazyregexp.New(`^BTRFS(?: \w+)? \(device ` + storageDev + `(?::? state [A-Za-z]+)?\): forced readonly`), ReadOnly},
	{lazyregexp.New(`^BTRFS:? (?:error|critical) \(device ` + storageDev + `(?::? state [A-Za-z]+)?\)`), FSError},
	{lazyregexp.New(`^BTRFS (?:warning|info) \(device ` + storageDev + `(?::? state [A-Za-z]+)?\): (?:csum failed |checksum error at logical )`), FSError},
	{lazyregexp.New(`^XFS \(` + storageDev + `\): (?:Filesystem has been shut down|xfs_do_force_shutdown\(0x[0-9A-Fa-f]+\) called from line|(?:Corruption of in-memory data|(?:Metadata|Log|Block device removal) I/O [Ee]rror|I/O [Ee]rror) \(0x[0-9A-Fa-f]+\) detected at |(?:Corruption of in-memory data|Log I/O Error|I/O Error) [Dd]etected\.\s+Shutting down filesystem)`), Shutdown},
	{lazyregexp.New(`^XFS \(` + storageDev + `\): (?:Corruption|Metadata corruption detected at|Metadata CRC error detected at|metadata I/O error|log mount/recovery failed: error|log I/O error -?\d+|xfs_log_force: error -?\d+ returned|Internal error )`), FSError},
	{lazyregexp.New(`^Buffer I/O error on dev(?:ice)? ([^,\s]+),`), IOError},
	{lazyregexp.New(`^(?:[a-z_]+: )?(?:I/O|critical medium|critical target|critical space allocation|critical nexus|timeout|recoverable transport|device offline|protection) error, dev ([^,\s]+), sector`), IOError},
	{lazyregexp.New(`^sd \d+:\d+:\d+:\d+: \[(sd[a-z]+)\] (?:tag#\d+ )?(?:Add\. Sense: (?:Unrecovered read error|Write error)|Sense Key : (?:Medium Error|Hardware Error))`), IOError},
	{lazyregexp.New(`^nvme (nvme\d+): controller is down`), NVMeDown},
	{lazyregexp.New(`^(nvme\d+n\d+): detected capacity change from [1-9]\d* to 0$`), NVMeDown},
	{lazyregexp.New(`^nvme (nvme\d+): I/O .*QID \d+ timeout`), NVMeTimeout},
	{lazyregexp.New(`^nvme (nvme\d+): (?:resetting controller|Device not ready; aborting reset|Removing after probe failure|Disabling device after reset failure|failed to set APST feature)`), NVMeReset},
}

// scsiResult is a SCSI disk command that failed for good ("FAILED
// Result:", or a disposition the kernel has no name for). Whether that is
// a fault is in its bytes: a host byte other than DID_OK (the disk did
// not answer, timed out, went away), or a driver byte of DRIVER_TIMEOUT
// (0x06, as kernels without SCSI constants print it). With DID_OK the
// sense data that follows tells: "Medium Error" is a fault, the empty
// card reader's "Not Ready" / "Medium not present" is not.
var scsiResult = lazyregexp.New(`^sd \d+:\d+:\d+:\d+: \[(sd[a-z]+)\] tag#\d+ (?:FAILED|UNKNOWN\(0x[0-9A-Fa-f]+\)) Result: hostbyte=(\w+) driverbyte=(\w+)`)

func scsiFailed(host, driver string) bool {
	hostOK := host == "DID_OK" || host == "0x00"
	timeout := driver == "DRIVER_TIMEOUT" || driver == "0x06"
	return !hostOK || timeout
}

// journalDevice names the filesystem device of a jbd2 journal: jbd2 calls
// an internal journal "<device>-<inode>" ("sda1-8", "dm-4-8"), so its
// faults and the filesystem's are one device's. A device-mapper name on
// its own ("dm-4", an external journal) is left as it is.
var (
	internalJournal = lazyregexp.New(`^(.+)-\d+$`)
	dmDevice        = lazyregexp.New(`^dm-\d+$`)
)

func journalDevice(name string) string {
	if dmDevice.MatchString(name) {
		return name
	}
	if m := internalJournal.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return name
}

// Parser turns kernel log records into faults. It is stateful only to join
// the driver's "The NVIDIA GPU …" record with the record that says it fell
// off the bus. A Parser is not safe for concurrent use.
type Parser struct {
	// pendingGPU is the GPU of a "The NVIDIA GPU <addr>" record whose
	// "fallen off the bus" part has not come yet; pendingLeft counts the
	// kernel records it may still come in.
	pendingGPU  string
	pendingLeft int
}

// joinWindow is how many records after "The NVIDIA GPU <addr>" may carry
// its "fallen off the bus": the driver prints the message in three lines,
// and other drivers' records can fall in between.
const joinWindow = 4

// Parse reads one record and returns the fault it reports, if any. A record
// of any facility but the kernel's is never a fault.
func (p *Parser) Parse(r Record) (Fault, bool) {
	if !r.Kernel() {
		return Fault{}, false
	}
	f, ok := p.parse(r.Text)
	if ok {
		f.Seq, f.Usec = r.Seq, r.Usec
		if len(f.Message) > MaxMessage {
			f.Message = cutUTF8(f.Message, MaxMessage)
		}
	}
	return f, ok
}

func (p *Parser) parse(text string) (Fault, bool) {
	pending := p.pendingGPU
	if p.pendingLeft > 0 {
		p.pendingLeft--
		if p.pendingLeft == 0 {
			p.pendingGPU = ""
		}
	}
	switch {
	case pending != "" && gpuLostRest.MatchString(text):
		// The rest of a "The NVIDIA GPU <addr>" message, printed as
		// records of its own (with or without the NVRM prefix).
		p.pendingGPU, p.pendingLeft = "", 0
		return Fault{Kind: FallenOffBus, GPU: pending, Message: "fallen off the bus and is not responding to commands"}, true
	case strings.HasPrefix(text, "NVRM: "):
		return p.nvrm(text)
	case strings.HasPrefix(text, "oom-kill:"), strings.Contains(text, "Killed process "):
		return oomKill(text)
	}
	if !mayBeStorage(text) {
		return Fault{}, false
	}
	for _, rule := range storageRules {
		if m := rule.re.FindStringSubmatch(text); m != nil {
			dev := m[1]
			if strings.HasPrefix(text, "Aborting journal") || strings.HasPrefix(text, "JBD2: ") {
				dev = journalDevice(dev)
			}
			return Fault{Kind: Storage, Device: dev, Storage: rule.kind, Message: text}, true
		}
	}
	if m := scsiResult.FindStringSubmatch(text); m != nil && scsiFailed(m[2], m[3]) {
		return Fault{Kind: Storage, Device: m[1], Storage: IOError, Message: text}, true
	}
	return Fault{}, false
}

// nvrm reads a record of the NVIDIA driver.
func (p *Parser) nvrm(text string) (Fault, bool) {
	if m := xidRecord.FindStringSubmatch(text); m != nil {
		xid, err := strconv.Atoi(m[3])
		if err != nil || xid <= 0 {
			return Fault{}, false
		}
		f := Fault{Kind: Xid, GPU: strings.ToLower(m[1]), Instance: strings.TrimSpace(m[2]), Xid: xid, Message: m[4]}
		if pm := xidPID.FindStringSubmatch(m[4]); pm != nil {
			if pid, err := strconv.Atoi(pm[1]); err == nil && pid > 0 {
				f.PID, f.Name = pid, pm[2]
			}
			f.Message = pm[3]
		}
		f.Message = strings.TrimSpace(f.Message)
		return f, true
	}
	if m := gpuHeader.FindStringSubmatch(text); m != nil {
		gpu := strings.ToLower(m[1])
		if strings.Contains(text, "fallen off the bus") {
			// The whole message in one record: the driver printed it
			// with embedded newlines, which /dev/kmsg escapes.
			return Fault{Kind: FallenOffBus, GPU: gpu, Message: "fallen off the bus and is not responding to commands"}, true
		}
		p.pendingGPU, p.pendingLeft = gpu, joinWindow
		return Fault{}, false
	}
	if m := gpuLost.FindStringSubmatch(text); m != nil {
		return Fault{Kind: FallenOffBus, GPU: strings.ToLower(m[1]), Message: "GPU has fallen off the bus"}, true
	}
	return Fault{}, false
}

func oomKill(text string) (Fault, bool) {
	var pid, name string
	if m := killedProcess.FindStringSubmatch(text); m != nil {
		pid, name = m[1], m[2]
	} else if m := oomKillTask.FindStringSubmatch(text); m != nil {
		name, pid = m[1], m[2]
	} else {
		return Fault{}, false
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return Fault{}, false
	}
	return Fault{Kind: OOMKill, PID: n, Name: name}, true
}

// cutUTF8 cuts s to at most n bytes on a character boundary, ending in "…".
func cutUTF8(s string, n int) string {
	const ell = "…"
	n -= len(ell)
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:max(n, 0)] + ell
}

// mayBeStorage is a cheap test before the storage expressions: most of a
// busy log is none of them.
func mayBeStorage(text string) bool {
	for _, p := range []string{"EXT4-fs ", "BTRFS", "XFS (", "Buffer I/O error", "nvme", "Aborting journal ", "JBD2: ", "sd "} {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return strings.Contains(text, " error, dev ")
}
