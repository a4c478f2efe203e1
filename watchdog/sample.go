package watchdog

import (
	"context"
	"time"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/phaseapi"
)

// Sample is one reading of the host, stamped by the watchdog's clock. A
// Sample is never changed once recorded: the history and every Alert share
// it by value.
type Sample struct {
	Time time.Time
	// Stopping marks the last poll before the process stops (PollAtStop):
	// a rule that holds an alert to let it settle, or waits to retry one,
	// pushes it now, since no later poll will.
	Stopping bool
	Swap     Swap
	Pressure Pressure
	OOM      OOM
	// Phases is the phase table at the time of the reading, as the phase
	// server answers it (durations, ETAs and rates as of the reading), for
	// the phase rules (failed, stalled, done) and to say which phase an OOM
	// kill hit.
	// The history keeps it only in the latest sample (see History).
	Phases []phaseapi.Phase
	// Run is the run of Phases; its Resumed says since when this process
	// has taken their pings, if it took the run over from a stopped one.
	Run phaseapi.Run
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
	// GPUs is NVML's pass over the GPUs at the poll (gpu.Snapshot's
	// Devices); empty when the host has none to read. GPUErr says why
	// they are missing: the telemetry is off (gpu.Open's error:
	// gpu.ErrNoCgo, ErrNoDriver, ErrNoGPU, …) or the pass failed
	// (Snapshot.Err). A poll without GPUs neither starts nor ends a GPU
	// incident: nothing was seen.
	GPUs   []gpu.Device
	GPUErr error
	// PhaseGPUs maps each active phase to the indexes of the GPUs its
	// process, or a descendant of it, runs on (see PhaseGPUs), in
	// ascending order; a phase on no GPU, or whose process cannot be
	// judged here, is absent. The hang and idle rules judge a phase by
	// its GPUs alone, and the other GPU rules name the phase a GPU was
	// serving. The history keeps GPUs and PhaseGPUs only in the latest
	// sample, as the phases.
	PhaseGPUs map[string][]int
}

// GPUsRead reports whether the poll read the GPUs: telemetry on, the
// pass whole, at least one GPU.
func (s Sample) GPUsRead() bool { return s.GPUErr == nil && len(s.GPUs) > 0 }

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

// phaseETA is the time the active phase p still needed to reach its total
// when the server answered; 0: unknown, or p ended.
func phaseETA(p phaseapi.Phase) time.Duration {
	if !p.Active() || p.ETASeconds == nil || *p.ETASeconds <= 0 {
		return 0
	}
	return time.Duration(*p.ETASeconds * float64(time.Second))
}

// ActivePhase is the active phase that started last: the one a person
// means by "during". ok is false when no phase is active.
func (s Sample) ActivePhase() (p phaseapi.Phase, ok bool) {
	for _, ph := range s.Phases {
		if ph.Active() && (!ok || ph.Started.After(p.Started)) {
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
