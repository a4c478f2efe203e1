package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// procCounters are the counters that split a slow request into its causes:
// major page faults (pages read back from swap or disk), time on a CPU, and
// time runnable but waiting for one (the run queue). Whatever else a
// request took was spent off the CPU: blocked on a fault's I/O, or on the
// network.
type procCounters struct {
	minflt, majflt int64
	run, wait      time.Duration // summed over the process's threads (schedstat)
}

func (c procCounters) sub(o procCounters) procCounters {
	return procCounters{c.minflt - o.minflt, c.majflt - o.majflt, c.run - o.run, c.wait - o.wait}
}

// readProcCounters reads /proc/PID/stat (faults, for the whole process)
// and /proc/PID/task/*/schedstat (per thread, summed).
func readProcCounters(pid int) (procCounters, error) {
	var c procCounters
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return c, err
	}
	// After the ")" that closes comm: state is field 3, minflt 10, majflt 12.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 10 {
		return c, fmt.Errorf("short /proc/%d/stat", pid)
	}
	c.minflt, _ = strconv.ParseInt(f[7], 10, 64)
	c.majflt, _ = strconv.ParseInt(f[9], 10, 64)
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return c, err
	}
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited
		}
		// "<on-CPU ns> <run-queue wait ns> <timeslices>"
		if f := strings.Fields(string(data)); len(f) >= 2 {
			run, _ := strconv.ParseInt(f[0], 10, 64)
			wait, _ := strconv.ParseInt(f[1], 10, 64)
			c.run += time.Duration(run)
			c.wait += time.Duration(wait)
		}
	}
	return c, nil
}

// procStatus reads the kB and count fields of /proc/PID/status that tell
// what is resident, locked and swapped, and how often the process was
// preempted.
func procStatus(pid int) (map[string]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch k {
		case "VmRSS", "VmLck", "VmSwap", "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches":
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				out[k] = n
			}
		}
	}
	return out, nil
}

// procSnapshot is one program's state at one moment of the thrash.
type procSnapshot struct {
	counters procCounters
	status   map[string]int64
}

func snapshot(pid int) procSnapshot {
	c, _ := readProcCounters(pid)
	s, _ := procStatus(pid)
	return procSnapshot{c, s}
}
