package main

import (
	"os"
	"testing"
	"time"
)

// The counters that split a slow scrape come from this process's real
// /proc files: on-CPU time grows with work, faults never go backwards, and
// the status fields are there.
func TestProcCountersOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skipf("no schedstat here: %v", err)
	}
	before, err := readProcCounters(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Work until the kernel has counted some CPU time, at most 10 s.
	sink, deadline := 0, time.Now().Add(10*time.Second)
	var after procCounters
	for time.Now().Before(deadline) {
		for i := range 1 << 20 {
			sink += i
		}
		if after, err = readProcCounters(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if after.run > before.run {
			break
		}
	}
	d := after.sub(before)
	if d.run <= 0 {
		t.Errorf("on-CPU time did not grow over a busy loop: %v (sink %d)", d.run, sink)
	}
	if d.minflt < 0 || d.majflt < 0 || d.wait < 0 {
		t.Errorf("counters went backwards: %+v", d)
	}
	st, err := procStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"VmRSS", "VmLck", "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status lacks %s: %v", k, st)
		}
	}
	if st["VmRSS"] <= 0 {
		t.Errorf("VmRSS %d kB, want > 0", st["VmRSS"])
	}
}
