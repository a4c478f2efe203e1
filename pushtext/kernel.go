package pushtext

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/watchdog"
)

// maxDriverText bounds the driver's own words quoted for an Xid the
// catalog does not know.
const maxDriverText = 80

// GPUFigures describe a GPU fault: an Xid, or a GPU fallen off the bus
// without one.
type GPUFigures struct {
	GPU      string // PCI address as the driver prints it, "0000:3b:00"
	Instance string // MIG instance, "GPU-I:02"; "" without MIG
	Xid      int    // 0: fallen off the bus, said without an Xid
	// Message is the driver's description, quoted for an Xid the
	// catalog lacks.
	Message string
	// The process the record names (PID 0: none), and the phase it hit:
	// ByPID when the process is the phase's or descends from it, else the
	// phase that was running.
	PID   int
	Name  string
	Phase string
	ByPID bool
	// NoRecord: worded without the kernel log's record, from a counter of
	// Xids by GPU and number (an Alertmanager alert). The action of an Xid
	// whose record states it (kmsg.ActionInRecord) is then not known, and
	// the catalog's default for it could say the opposite of the record.
	NoRecord bool
	// Repeats and Window: the push that counts a window's repeats.
	Repeats int
	Window  time.Duration
}

// GPU is `GPU 0000:3b:00 Xid 79: fallen off the bus — reboot the host;
// phase "Pretrain 1/3" (python3, pid 4242) was using it`, with the action
// of NVIDIA's catalog for the Xid (or the one an Xid 154 states). An Xid
// the catalog lacks is named with its number and the driver's words; one
// whose record states its action, worded without that record (NoRecord),
// says "see the kernel log for the action". The
// push that counts repeats says `GPU 0000:3b:00 Xid 79 again 41 times in
// 10m: …`. Subject "gpu 0000:3b:00 xid 79".
func GPU(g GPUFigures) Text {
	var b strings.Builder
	b.WriteString("GPU " + oneLine(g.GPU))
	if g.Instance != "" {
		b.WriteString(" (" + oneLine(g.Instance) + ")")
	}
	subject := "gpu " + oneLine(g.GPU)
	fault := kmsg.Fault{Kind: kmsg.FallenOffBus, Xid: g.Xid, Message: g.Message}
	if g.Xid > 0 {
		fmt.Fprintf(&b, " Xid %d", g.Xid)
		subject += " xid " + strconv.Itoa(g.Xid)
		fault.Kind = kmsg.Xid
	}
	b.WriteString(again(g.Repeats, g.Window))
	info, known := kmsg.LookupXid(g.Xid)
	switch {
	case g.Xid == 0:
		b.WriteString(": fallen off the bus")
	case known:
		b.WriteString(": " + info.Description)
	default:
		b.WriteString(" (not in lavender's Xid catalog)")
		if msg := oneLine(g.Message); msg != "" {
			b.WriteString(": " + textsafe.Truncate(msg, maxDriverText))
		}
	}
	if action, ok := kmsg.ActionOf(fault); g.NoRecord && g.Xid > 0 && kmsg.ActionInRecord(g.Xid) {
		b.WriteString(" — " + actionInTheLog)
	} else if ok {
		b.WriteString(" — " + action.Advice())
	}
	b.WriteString(hitPhase(g.Phase, g.ByPID, g.Name, g.PID))
	if g.Repeats > 0 {
		subject += " ×" + strconv.Itoa(g.Repeats)
	}
	return Text{Body: b.String(), Subject: subject}
}

// actionInTheLog is the action of an Xid worded without the record that
// states it.
const actionInTheLog = "see the kernel log for the action"

// again is " again 41 times in 10m" for a push that counts repeats.
func again(repeats int, window time.Duration) string {
	switch {
	case repeats <= 0:
		return ""
	case repeats == 1:
		return " again in " + HumanDuration(window)
	}
	return fmt.Sprintf(" again %d times in %s", repeats, HumanDuration(window))
}

// hitPhase says whom a fault hit: `; phase "Pretrain 1/3" (python3, pid
// 4242) was using it`, `; python3 (pid 4242) was using it` for a process
// of no phase, `; phase "Pretrain 1/3" was running` for a record that
// names no process.
func hitPhase(phase string, byPID bool, name string, pid int) string {
	switch {
	case phase != "" && byPID && pid > 0:
		return fmt.Sprintf("; phase %s (%s, pid %d) was using it", strconv.Quote(phaseName(phase)), victimName(name), pid)
	case pid > 0:
		return fmt.Sprintf("; %s (pid %d) was using it", victimName(name), pid)
	case phase != "":
		return "; phase " + strconv.Quote(phaseName(phase)) + " was running"
	}
	return ""
}

// DiskFigures describe a storage fault.
type DiskFigures struct {
	Device  string // "nvme1n1p1", "sda", "nvme0"
	Kind    kmsg.StorageKind
	Phase   string // the phase running then
	Repeats int
	Window  time.Duration
}

// diskWords are what a storage fault is and what it means for a run.
var diskWords = map[kmsg.StorageKind][2]string{
	kmsg.ReadOnly:    {"remounted read-only", "checkpoints will fail"},
	kmsg.Shutdown:    {"filesystem shut down", "checkpoints will fail"},
	kmsg.FSError:     {"filesystem error", "checkpoints may fail"},
	kmsg.IOError:     {"I/O error", "checkpoints may fail"},
	kmsg.NVMeTimeout: {"NVMe command timed out", "the disk may be failing"},
	kmsg.NVMeReset:   {"NVMe controller reset", "the disk may be failing"},
	kmsg.NVMeDown:    {"NVMe controller is down", "checkpoints will fail"},
}

// nvmeNamespace is an NVMe namespace's block device ("nvme2n1"), which the
// kernel names in a nvme_down fault when its capacity dropped to 0; a
// controller ("nvme2") is named when it went down.
var nvmeNamespace = lazyregexp.New(`^nvme\d+n\d+$`)

// wordsFor is diskWords for a fault of the device.
func wordsFor(kind kmsg.StorageKind, device string) ([2]string, bool) {
	if kind == kmsg.NVMeDown && nvmeNamespace.MatchString(device) {
		return [2]string{"gone (capacity dropped to 0)", "checkpoints will fail"}, true
	}
	words, ok := diskWords[kind]
	return words, ok
}

// Disk is `disk nvme1n1p1 remounted read-only — checkpoints will fail`,
// `disk sda I/O error again 41 times in 10m — checkpoints may fail; phase
// "Pretrain 1/3" was running`. Subject "disk nvme1n1p1 read_only".
func Disk(d DiskFigures) Text {
	words, ok := wordsFor(d.Kind, d.Device)
	if !ok {
		words = [2]string{strings.ReplaceAll(oneLine(string(d.Kind)), "_", " "), "checkpoints may fail"}
	}
	dev := oneLine(d.Device)
	body := "disk " + dev + " " + words[0] + again(d.Repeats, d.Window) + " — " + words[1] + hitPhase(d.Phase, false, "", 0)
	subject := "disk " + dev + " " + string(d.Kind)
	if d.Repeats > 0 {
		subject += " ×" + strconv.Itoa(d.Repeats)
	}
	return Text{Body: body, Subject: subject}
}

// kernelFault is the text of a gpu or disk alert.
func kernelFault(a watchdog.Alert) Text {
	f := a.Fault
	if a.Rule == watchdog.RuleDisk {
		return Disk(DiskFigures{Device: f.Device, Kind: f.Storage, Phase: f.Phase, Repeats: a.Repeats, Window: a.Window})
	}
	g := GPUFigures{GPU: f.GPU, Instance: f.Instance, Message: f.Message, PID: f.PID, Name: f.Name,
		Phase: f.Phase, ByPID: f.ByPID, Repeats: a.Repeats, Window: a.Window}
	if f.Kind == kmsg.Xid {
		g.Xid = f.Xid
	}
	return GPU(g)
}

// FaultReason is a fault as the reason of a phase that died of it: `GPU
// 0000:3b:00 Xid 79: fallen off the bus`, `disk nvme1n1p1 remounted
// read-only`.
func FaultReason(f watchdog.KernelFault) string {
	if f.Kind == kmsg.Storage {
		words, ok := wordsFor(f.Storage, f.Device)
		if !ok {
			words[0] = string(f.Storage)
		}
		return "disk " + oneLine(f.Device) + " " + words[0]
	}
	reason := "GPU " + oneLine(f.GPU)
	if f.Kind == kmsg.Xid {
		reason += " Xid " + strconv.Itoa(f.Xid)
		if info, ok := kmsg.LookupXid(f.Xid); ok {
			return reason + ": " + info.Description
		}
		return reason
	}
	return reason + ": fallen off the bus"
}
