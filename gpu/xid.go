package gpu

import (
	"sync"
	"time"
)

// EventKind is what an NVML event reported.
type EventKind string

const (
	// EventXid: the driver raised an Xid (nvmlEventTypeXidCriticalError),
	// the same error the kernel log prints as "NVRM: Xid (PCI:…): N".
	EventXid EventKind = "xid"
	// EventDoubleBitECC: an uncorrectable (double-bit) ECC error; the
	// driver usually logs Xid 48 or 94/95 with it.
	EventDoubleBitECC EventKind = "ecc_double_bit"
)

// XidEvent is one event from NVML's event set.
type XidEvent struct {
	Time  time.Time // when the watcher received it; NVML gives no time
	Kind  EventKind
	Index int    // the GPU's NVML index, -1 if the event named no known GPU
	BusID string // NormalizeBusID's form, as kmsg.Fault.GPU
	UUID  string
	// Xid is the Xid number for EventXid (999 is the driver's "unknown
	// Xid"); 0 for other kinds.
	Xid uint64
}

// DefaultDedupWindow is how long XidDedup treats a second report of the
// same Xid on the same GPU as the same error. NVML delivers an Xid within
// milliseconds and the kernel log reader within its poll, so a few
// seconds cover both; 30 s also folds the bursts in which the driver
// repeats one Xid, which would otherwise push once each.
const DefaultDedupWindow = 30 * time.Second

// XidDedup folds the two sources of Xids, NVML's events and the kernel
// log, into one: the driver reports every Xid to both, so a caller that
// reads both would alert twice. The caller passes each report, from
// either source, to First with the time it received it (both sources
// arrive within moments of the error, and the kernel log's own stamp is
// time since boot, not wall time) and acts only when First says true.
// The key is the GPU's bus id in NormalizeBusID's form, which both
// kmsg.Fault.GPU and XidEvent.BusID already use, and the Xid number.
//
// It is safe for concurrent use: each source calls it from its own
// goroutine.
type XidDedup struct {
	Window time.Duration // default DefaultDedupWindow

	mu   sync.Mutex
	seen map[xidKey]time.Time
}

type xidKey struct {
	bus string
	xid uint64
}

// First reports whether this is the first report of xid on the GPU at
// busID within the window before t, and records it. A bus id that
// NormalizeBusID cannot read is used as given. Reports that repeat within
// the window extend nothing: the window runs from the first report, so an
// Xid that keeps recurring is let through once per window.
func (d *XidDedup) First(busID string, xid uint64, t time.Time) bool {
	if id, ok := NormalizeBusID(busID); ok {
		busID = id
	}
	win := d.Window
	if win <= 0 {
		win = DefaultDedupWindow
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[xidKey]time.Time{}
	}
	k := xidKey{busID, xid}
	if last, ok := d.seen[k]; ok {
		// The two sources' reports may come in either order.
		if gap := t.Sub(last); gap < win && gap > -win {
			return false
		}
	}
	d.seen[k] = t
	// Forget what lies outside every window, so a long-running process
	// holds only the recent Xids.
	for k, at := range d.seen {
		if t.Sub(at) >= win {
			delete(d.seen, k)
		}
	}
	return true
}

// XidWatch is a running watcher of NVML's events (Reader.WatchXids).
type XidWatch struct {
	// Skipped joins the failures of the GPUs that could not be
	// registered for events (nil when every GPU was); the others are
	// watched.
	Skipped error
	done    chan struct{}
}

// Done is closed when the watcher has stopped: its context ended or the
// Reader was closed.
func (w *XidWatch) Done() <-chan struct{} { return w.done }
