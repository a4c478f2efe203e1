package kmsg

import (
	"regexp"
	"strconv"
	"strings"
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
	FSError     StorageKind = "fs_error"     // EXT4-fs error, BTRFS error, XFS corruption or metadata I/O error
	ReadOnly    StorageKind = "read_only"    // the filesystem was remounted read-only (ext4) or forced read-only (btrfs)
	Shutdown    StorageKind = "shutdown"     // XFS shut the filesystem down
	IOError     StorageKind = "io_error"     // the block layer failed a request ("I/O error, dev sda"), or "Buffer I/O error on dev"
	NVMeTimeout StorageKind = "nvme_timeout" // an NVMe command timed out
	NVMeReset   StorageKind = "nvme_reset"   // an NVMe controller is being reset or was removed
	NVMeDown    StorageKind = "nvme_down"    // "controller is down; will reset"
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
	xidRecord = regexp.MustCompile(`^NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-9A-Fa-f])?((?: GPU-C?I:[0-9A-Fa-f]+)*)\): (\d{1,4}),\s*(.*)$`)
	xidPID    = regexp.MustCompile(`^pid=('?<unknown>'?|\d+), name=([^,]*), ?(.*)$`)
	gpuLost   = regexp.MustCompile(`^NVRM: GPU (?:at )?(?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-9A-Fa-f])?:? .*fallen off the bus`)
	gpuHeader = regexp.MustCompile(`^NVRM: The NVIDIA GPU ([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-9A-Fa-f])?`)
)

// The OOM killer's two records for a kill (mm/oom_kill.c):
//
//	oom-kill:constraint=CONSTRAINT_NONE,…,task_memcg=/,task=python3,pid=4242,uid=1000
//	Out of memory: Killed process 4242 (python3) total-vm:… (or "Memory cgroup out of memory: …")
var (
	killedProcess = regexp.MustCompile(`Killed process (\d+) \((.*?)\)(?: |$)`)
	oomKillTask   = regexp.MustCompile(`^oom-kill:.*[:,]task=([^,]*),pid=(\d+)`)
)

// Storage records (fs/ext4, fs/xfs, fs/btrfs, block/blk-core, fs/buffer.c,
// drivers/nvme/host):
//
//	EXT4-fs error (device nvme1n1p1): ext4_find_entry:1455: inode #2: comm python3: reading directory lblock 0
//	EXT4-fs (nvme1n1p1): Remounting filesystem read-only
//	XFS (dm-0): Filesystem has been shut down due to log error (0x2).
//	Buffer I/O error on dev sda1, logical block 0, async page read
//	I/O error, dev sda, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0
//	blk_update_request: I/O error, dev sda, sector 2048 op 0x1:(WRITE) …
//	nvme nvme0: I/O 123 QID 4 timeout, aborting
//	nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0x10
var storageRules = []struct {
	re   *regexp.Regexp
	kind StorageKind
}{
	{regexp.MustCompile(`^EXT4-fs \(([^)\s]+)\): Remounting filesystem read-only`), ReadOnly},
	{regexp.MustCompile(`^EXT4-fs (?:error|critical) \(device ([^)\s]+)\)`), FSError},
	{regexp.MustCompile(`^BTRFS(?: \w+)? \(device ([^)\s]+)(?:: state \w+)?\): forced readonly`), ReadOnly},
	{regexp.MustCompile(`^BTRFS (?:error|critical) \(device ([^)\s]+)`), FSError},
	{regexp.MustCompile(`^XFS \(([^)\s]+)\): (?:Filesystem has been shut down|.*Shutting down filesystem|.*shutting down filesystem)`), Shutdown},
	{regexp.MustCompile(`^XFS \(([^)\s]+)\): (?:Corruption|metadata I/O error|.*[Ww]rite error|.*I/O error)`), FSError},
	{regexp.MustCompile(`^Buffer I/O error on dev(?:ice)? ([^,\s]+),`), IOError},
	{regexp.MustCompile(`^(?:[a-z_]+: )?(?:I/O|critical medium|critical target|critical space allocation|critical nexus|timeout|transport) error, dev ([^,\s]+), sector`), IOError},
	{regexp.MustCompile(`^nvme (nvme\d+): controller is down`), NVMeDown},
	{regexp.MustCompile(`^nvme (nvme\d+): I/O .*QID \d+ timeout`), NVMeTimeout},
	{regexp.MustCompile(`^nvme (nvme\d+): (?:resetting controller|Device not ready; aborting reset|Removing after probe failure|Disabling device after reset failure|failed to set APST feature)`), NVMeReset},
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
	case pending != "" && strings.Contains(text, "fallen off the bus") && !strings.HasPrefix(text, "NVRM: Xid"):
		// The rest of a "The NVIDIA GPU <addr>" message, printed as
		// records of its own (with or without the NVRM prefix).
		p.pendingGPU, p.pendingLeft = "", 0
		return Fault{Kind: FallenOffBus, GPU: pending, Message: "fallen off the bus and is not responding to commands"}, true
	case strings.HasPrefix(text, "NVRM: "):
		return p.nvrm(text)
	case strings.Contains(text, "Killed process "), strings.HasPrefix(text, "oom-kill:"):
		return oomKill(text)
	}
	if !mayBeStorage(text) {
		return Fault{}, false
	}
	for _, rule := range storageRules {
		if m := rule.re.FindStringSubmatch(text); m != nil {
			return Fault{Kind: Storage, Device: m[1], Storage: rule.kind, Message: text}, true
		}
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
	for _, p := range []string{"EXT4-fs ", "BTRFS", "XFS (", "Buffer I/O error", "nvme nvme"} {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return strings.Contains(text, " error, dev ")
}
