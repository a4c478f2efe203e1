package watchdog

import (
	"context"
	"time"

	"lavender/phaseapi"
)

// Sample is one reading of the host, stamped by the watchdog's clock. A
// Sample is never changed once recorded: the history and every Alert share
// it by value.
type Sample struct {
	Time     time.Time
	Swap     Swap
	Pressure Pressure
	OOM      OOM
	// Phases is the phase table at the time of the reading, for the phase
	// rules (failed, stalled, done) and to say which phase an OOM kill hit.
	// The history keeps it only in the latest sample (see History).
	Phases []PhaseState
	// Ends are the latest ends of phases, oldest first, numbered: a phase
	// that fails and starts again within one poll shows running in Phases,
	// and its failure only here.
	Ends []phaseapi.PhaseEnd
	// Disks are the watched filesystems that could be read at the poll;
	// UnreadableDisks the watched paths that could not (Disk.Err says
	// why). The history keeps them only in the latest sample, as the
	// phases.
	Disks           []Disk
	UnreadableDisks []Disk
}

// Swap is the host's swap use. TotalBytes == 0 means the host has no swap;
// Ratio is then 0 and no rule pages on it.
type Swap struct {
	UsedBytes  uint64
	TotalBytes uint64
	Ratio      float64 // UsedBytes/TotalBytes, 0..1
}

// Pressure is the memory pressure the kernel reports in
// <procfs>/pressure/memory (PSI), as ratios 0..1 rather than the file's
// percentages. Available is false on a kernel without PSI (no file, or
// EOPNOTSUPP): the pressure rule is then silent.
type Pressure struct {
	Available bool
	Some      float64 // "some avg10": share of the last 10 s in which at least one task stalled on memory
	Full      float64 // "full avg10": share of the last 10 s in which every non-idle task stalled at once
}

// OOM is the kernel's count of OOM kills. Available is false where
// <procfs>/vmstat has no oom_kill (kernels before 4.13).
type OOM struct {
	Available bool
	Kills     uint64 // vmstat oom_kill: kills since boot
	// Victim is the newest "Out of memory: Killed process" record of the
	// kernel log, if the log was readable (root or CAP_SYSLOG); zero
	// otherwise.
	Victim Victim
}

// Victim is a process the OOM killer killed, as the kernel log names it.
type Victim struct {
	PID  int
	Name string
	// Seq is the kernel log record's sequence number, if the reader knows
	// it: two kills of processes that reuse a pid and a name stay apart.
	Seq uint64
	// Owner says whose process it was, as the reader judged it from the
	// phases' processes and their descendants; Phase names the phase when
	// it was one's.
	Owner VictimOwner
	Phase string
}

// VictimOwner says whose process an OOM victim was.
type VictimOwner int

const (
	VictimOwnerUnknown VictimOwner = iota // not judged
	VictimOfPhase                         // a phase's process or a descendant of it
	VictimOfNoPhase                       // no phase's: every running phase's process is known
)

// Known reports whether the kernel log named a victim.
func (v Victim) Known() bool { return v.PID > 0 }

// Same reports whether v and o are the same kernel log record, whatever
// was judged of them.
func (v Victim) Same(o Victim) bool { return v.PID == o.PID && v.Name == o.Name && v.Seq == o.Seq }

// PhaseState is one phase of the current run, as the phase rules need it.
type PhaseState struct {
	Name          string
	Status        string
	Started       time.Time
	Ended         time.Time // zero while active
	LastHeartbeat time.Time
	// Step and Total are the progress the heartbeats carry; HasStep is
	// false for a phase that never reported a step (Step 0 is a step).
	// Total 0 means unknown.
	HasStep    bool
	Step       int64
	Total      int64
	ProgressAt time.Time // when Step last moved
	// ETA is the estimated time the active phase still needs to reach
	// its Total; 0: unknown.
	ETA time.Duration

	// Reason is why the phase ended, as its end said, or "died without
	// ending (pid 4242 gone)" when the server ended it.
	Reason string
	// PID is the process doing the work, as the phase's start named it;
	// 0 when none was named.
	PID int64
	// Dirs are the directories the phase writes to.
	Dirs []string
	// SaveBytes is the size of the newest checkpoint save; HasSave is
	// false before the first.
	HasSave   bool
	SaveBytes uint64
	// Loss is the latest training loss (NaN and ±Inf as such); HasLoss is
	// false before the first.
	HasLoss bool
	Loss    float64
	// EvalStep and EvalTotal (0: unknown) are the evaluation loop's
	// progress, EvalProgressAt when EvalStep last changed; HasEval is
	// false before the first.
	HasEval        bool
	EvalStep       int64
	EvalTotal      int64
	EvalProgressAt time.Time
	// Busy is the work between steps (evaluating, saving) the client last
	// saw moving, at BusyAt; HasBusy is set once it said so.
	HasBusy bool
	Busy    string
	BusyAt  time.Time
}

// ActivePhase is the active phase that started last: the one a person
// means by "during". ok is false when no phase is active.
func (s Sample) ActivePhase() (p PhaseState, ok bool) {
	for _, ph := range s.Phases {
		if ph.Status == phaseapi.StatusActive && (!ok || ph.Started.After(p.Started)) {
			p, ok = ph, true
		}
	}
	return p, ok
}

// Reader reads the host once. cmd supplies it from the exporter's readers.
// It returns an error only when the reading is unusable (swap could not be
// read); a piece the host does not offer (PSI, oom_kill, the kernel log) is
// marked unavailable instead. Time is set by the watchdog.
type Reader func(ctx context.Context) (Sample, error)
