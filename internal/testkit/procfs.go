package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Swap32GiBinKB is 32 GiB of swap in meminfo's kB, the size most tests use.
const Swap32GiBinKB = 32 << 20

// Swap is what meminfo says about swap, in meminfo's kB.
type Swap struct {
	TotalKB, UsedKB uint64
}

// SwapAt is ratio (0–1) of totalKB used, rounded down to a whole kB.
func SwapAt(totalKB uint64, ratio float64) Swap {
	return Swap{TotalKB: totalKB, UsedKB: uint64(float64(totalKB) * ratio)}
}

// UsedBytes and TotalBytes are the figures lavender reports.
func (s Swap) UsedBytes() uint64  { return s.UsedKB * 1024 }
func (s Swap) TotalBytes() uint64 { return s.TotalKB * 1024 }

// Ratio is UsedKB/TotalKB; 0 without swap.
func (s Swap) Ratio() float64 {
	if s.TotalKB == 0 {
		return 0
	}
	return float64(s.UsedKB) / float64(s.TotalKB)
}

// PSI is /proc/pressure/memory: the averages are percentages, the totals
// microseconds of stall since boot.
type PSI struct {
	SomeAvg10, SomeAvg60, SomeAvg300 float64
	SomeTotal                        uint64
	FullAvg10, FullAvg60, FullAvg300 float64
	FullTotal                        uint64
}

// Host is the state a Procfs describes.
type Host struct {
	Swap Swap
	// OOMKills is vmstat's oom_kill, the OOM kills since boot.
	OOMKills uint64
	// PSI is nil for a kernel without pressure stall information: no
	// pressure/memory file at all.
	PSI *PSI
	// MemTotalKB and MemAvailableKB default to 64 000 MiB and 9 600 MiB.
	MemTotalKB, MemAvailableKB uint64
}

// Procfs is a fake /proc in a temp dir with meminfo, vmstat and
// pressure/memory, for --path.procfs. Every change rewrites the files
// atomically (write aside, rename), so a reader polling it never sees half
// a file. Its methods are safe for concurrent use.
type Procfs struct {
	// Dir is the directory to pass as --path.procfs.
	Dir string

	t    testing.TB
	mu   sync.Mutex
	host Host
}

// NewProcfs writes a fake procfs describing h into a fresh temp dir.
func NewProcfs(t testing.TB, h Host) *Procfs {
	t.Helper()
	p := &Procfs{Dir: t.TempDir(), t: t}
	p.Set(h)
	return p
}

// SwapProcfs is the common case: 32 GiB of swap, ratio (0–1) used, no OOM
// kills, no PSI. It returns the directory.
func SwapProcfs(t testing.TB, ratio float64) string {
	t.Helper()
	return NewProcfs(t, Host{Swap: SwapAt(Swap32GiBinKB, ratio)}).Dir
}

// Host returns the state the files describe now.
func (p *Procfs) Host() Host {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.host
	h.PSI = clonePSI(h.PSI)
	return h
}

// Set rewrites every file to describe h.
func (p *Procfs) Set(h Host) {
	p.t.Helper()
	p.update(func(cur *Host) {
		*cur = h
		cur.PSI = clonePSI(h.PSI)
	})
}

// SetSwap changes the swap figures and returns them.
func (p *Procfs) SetSwap(s Swap) Swap {
	p.t.Helper()
	p.update(func(h *Host) { h.Swap = s })
	return s
}

// SetOOMKills changes vmstat's oom_kill.
func (p *Procfs) SetOOMKills(n uint64) {
	p.t.Helper()
	p.update(func(h *Host) { h.OOMKills = n })
}

// SetPSI changes pressure/memory; nil removes it (a kernel without PSI).
func (p *Procfs) SetPSI(psi *PSI) {
	p.t.Helper()
	p.update(func(h *Host) { h.PSI = clonePSI(psi) })
}

// clonePSI copies psi, so the caller's later changes to it (or to what Host
// returned) do not reach the files' state behind the lock.
func clonePSI(psi *PSI) *PSI {
	if psi == nil {
		return nil
	}
	c := *psi
	return &c
}

func (p *Procfs) update(change func(*Host)) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	change(&p.host)
	p.writeLocked()
}

func (p *Procfs) writeLocked() {
	p.t.Helper()
	h := p.host
	if h.Swap.UsedKB > h.Swap.TotalKB {
		p.t.Fatalf("testkit: fake procfs: swap used %d kB exceeds total %d kB", h.Swap.UsedKB, h.Swap.TotalKB)
	}
	memTotal, memAvailable := h.MemTotalKB, h.MemAvailableKB
	if memTotal == 0 {
		memTotal = 65536000
	}
	if memAvailable == 0 {
		memAvailable = min(9830400, memTotal)
	}
	p.write("meminfo", fmt.Sprintf(
		"MemTotal:       %8d kB\n"+
			"MemFree:         1234567 kB\n"+
			"MemAvailable:   %8d kB\n"+
			"Buffers:          102400 kB\n"+
			"Cached:          4096000 kB\n"+
			"SwapCached:      1048576 kB\n"+
			"SwapTotal:      %8d kB\n"+
			"SwapFree:       %8d kB\n",
		memTotal, memAvailable, h.Swap.TotalKB, h.Swap.TotalKB-h.Swap.UsedKB))
	p.write("vmstat", fmt.Sprintf("pgpgin 1000\npgpgout 2000\npswpin 100\npswpout 200\noom_kill %d\n", h.OOMKills))
	pressure := filepath.Join(p.Dir, "pressure", "memory")
	if h.PSI == nil {
		if err := os.Remove(pressure); err != nil && !os.IsNotExist(err) {
			p.t.Fatalf("testkit: fake procfs: %v", err)
		}
		return
	}
	if err := os.MkdirAll(filepath.Dir(pressure), 0o755); err != nil {
		p.t.Fatalf("testkit: fake procfs: %v", err)
	}
	s := h.PSI
	p.write(filepath.Join("pressure", "memory"), fmt.Sprintf(
		"some avg10=%.2f avg60=%.2f avg300=%.2f total=%d\nfull avg10=%.2f avg60=%.2f avg300=%.2f total=%d\n",
		s.SomeAvg10, s.SomeAvg60, s.SomeAvg300, s.SomeTotal, s.FullAvg10, s.FullAvg60, s.FullAvg300, s.FullTotal))
}

// write replaces Dir/name atomically.
func (p *Procfs) write(name, content string) {
	p.t.Helper()
	path := filepath.Join(p.Dir, name)
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(name)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		p.t.Fatalf("testkit: fake procfs: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		p.t.Fatalf("testkit: fake procfs: %v", err)
	}
}
