package exporter

import "context"

// HostReading is one reading of everything the watchdog watches on the
// host: swap from meminfo, memory pressure from pressure/memory, and the
// OOM kill count from vmstat.
type HostReading struct {
	Swap Swap
	// Pressure has Available false on a kernel without PSI, and after a
	// failed read, which PressureErr then holds.
	Pressure    Pressure
	PressureErr error
	// OOMKills is vmstat's oom_kill; HaveOOMKills is false on kernels
	// before 4.13 and after a failed read, which OOMErr then holds.
	OOMKills     uint64
	HaveOOMKills bool
	OOMErr       error
}

// ReadHost reads swap, pressure and OOM kills from procfs ("" means /proc).
// Only a swap failure fails the reading: a pressure or vmstat failure must
// not blind the swap rule, so it is reported in its own field.
func ReadHost(ctx context.Context, procfs string) (HostReading, error) {
	s, err := ReadSwap(ctx, procfs)
	if err != nil {
		return HostReading{}, err
	}
	r := HostReading{Swap: s}
	if procfs == "" {
		procfs = DefaultProcFS
	}
	r.Pressure, r.PressureErr = ReadPressure(procfs)
	a, err := readSwapActivity(procfs)
	r.OOMKills, r.HaveOOMKills, r.OOMErr = a.OOMKills, a.HaveOOMKills && err == nil, err
	return r, nil
}
