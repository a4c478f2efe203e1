package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lavender-ml/lavender/exporter"
	"github.com/lavender-ml/lavender/watchdog"
)

// runPressure thrashes the machine for real: a swap file, a memory hog in a
// small memory cgroup, and lavender serve and node_exporter inside that
// cgroup beside it. It times when memory pressure and swap each crossed
// their thresholds and when lavender's pushes for them reached the Bark
// stand-in, and the scrape latency of both exporters while their own pages
// are being evicted. Where the machine cannot do this (not root, no PSI, no
// swapon, no memory cgroup, swap already active) it prints why and skips.
//
// It always undoes what it set up (swapoff, the file, the cgroup), also on
// error or interrupt; bench/run.sh's trap covers lavbench being killed.
func runPressure(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pressure", flag.ContinueOnError)
	lavender := fs.String("lavender", "lavender", "lavender binary")
	nodeExporter := fs.String("node-exporter", "prometheus-node-exporter", "node_exporter binary")
	swapFile := fs.String("swap-file", "/var/tmp/lavbench-pressure.swap", "swap file to create, on a disk filesystem (swapon refuses tmpfs and overlayfs)")
	swapMiB := fs.Int("swap-mib", 2048, "size of the swap file")
	cgroupName := fs.String("cgroup", "lavbench-pressure", "name of the memory cgroup to create")
	memMaxMiB := fs.Int("memory-max-mib", 256, "memory limit of the cgroup")
	hogMiB := fs.Int("hog-mib", 1536, "memory the hog allocates and keeps touching")
	hogRate := fs.Int("hog-rate-mib", 48, "the hog's allocation rate, MiB/s")
	seconds := fs.Int("seconds", 150, "longest the thrash may last (at most 180)")
	scrapeEvery := fs.Duration("scrape-every", 250*time.Millisecond, "pause between scrapes of each exporter")
	threshold := fs.Float64("pressure-threshold", watchdog.DefaultPressureThreshold, "PSI some avg10 (0-1) whose crossing is timed")
	lavenderArgs := fs.String("lavender-args", "", "extra arguments for lavender serve, split at spaces (e.g. \"--runtime.gomaxprocs=2\"), to compare variants under the same thrash")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *seconds < 10 || *seconds > 180 || *swapMiB < 256 || *swapMiB > 16384 || *memMaxMiB < 64 ||
		*hogMiB <= *memMaxMiB || *hogRate < 1 || *hogRate > 1024 || *scrapeEvery < 10*time.Millisecond {
		return fmt.Errorf("seconds 10-180, swap-mib 256-16384, memory-max-mib >= 64 and below hog-mib, hog-rate-mib 1-1024, scrape-every >= 10ms")
	}
	fmt.Println("## Memory pressure: a real thrash")
	fmt.Println()
	cg, reason := pressurePrereqs(*swapFile, *swapMiB)
	if reason != "" {
		fmt.Printf("skipped: %s\n\n", reason)
		return nil
	}

	var undo []func()
	defer func() {
		killAll() // the children leave the cgroup and free the swap first
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}()
	undo = append(undo, func() {
		if err := os.Remove(*swapFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "pressure: remove %s: %v\n", *swapFile, err)
		}
	})
	if err := makeSwapFile(*swapFile, *swapMiB); err != nil {
		fmt.Printf("skipped: %v\n\n", err)
		return nil
	}
	if out, err := exec.Command("swapon", *swapFile).CombinedOutput(); err != nil {
		fmt.Printf("skipped: swapon %s failed (%v: %s); swap files need a disk filesystem such as ext4 or xfs, not tmpfs or overlayfs\n\n",
			*swapFile, err, strings.TrimSpace(string(out)))
		return nil
	}
	undo = append(undo, func() {
		if out, err := exec.Command("swapoff", *swapFile).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "pressure: swapoff %s: %v %s\n", *swapFile, err, out)
		}
	})
	cgDir, err := cg.create(*cgroupName, *memMaxMiB)
	if err != nil {
		return err
	}
	undo = append(undo, func() { cg.remove(cgDir) })

	dir, bark, cleanup, err := newRig()
	if err != nil {
		return err
	}
	undo = append(undo, cleanup)
	barkDir, err := writeTargets(dir, bark, "KEY")
	if err != nil {
		return err
	}
	lavAddr, err := freeAddr()
	if err != nil {
		return err
	}
	neAddr, err := freeAddr()
	if err != nil {
		return err
	}
	// lavender at its defaults: the watchdog polls every 5s; its pressure
	// rule, once it exists, pushes "memory pressure …".
	lavArgv := append([]string{"serve", "--web.listen-address=" + lavAddr, "--path.procfs=/proc",
		"--runlog.dir=" + filepath.Join(dir, "logs"), "--bark.config-dir=" + barkDir}, strings.Fields(*lavenderArgs)...)
	lav, err := start(dir, "serve", nil, *lavender, lavArgv...)
	if err != nil {
		return err
	}
	ne, err := start(dir, "node_exporter", nil, *nodeExporter, "--web.listen-address="+neAddr,
		"--collector.disable-defaults", "--collector.meminfo", "--collector.vmstat", "--collector.pressure")
	if err != nil {
		return err
	}
	for _, p := range []*proc{lav, ne} {
		if err := cg.enter(cgDir, p.pid()); err != nil {
			return err
		}
	}
	lavURL, neURL := "http://"+lavAddr+"/metrics", "http://"+neAddr+"/metrics"
	if err := waitHTTP(ctx, lav, "http://"+lavAddr+"/-/ready", 20*time.Second); err != nil {
		return err
	}
	if err := waitHTTP(ctx, ne, neURL, 20*time.Second); err != nil {
		return err
	}
	// Start from a quiet machine, so the crossings are the hog's.
	if p, _ := exporter.ReadPressure(""); p.SomeAvg10 >= *threshold {
		fmt.Printf("skipped: memory pressure is already %.0f %% before the hog starts\n\n", p.SomeAvg10*100)
		return nil
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	hog, err := start(dir, "hog", nil, self, "pressure-hog", "-mib", strconv.Itoa(*hogMiB),
		"-rate-mib", strconv.Itoa(*hogRate), "-seconds", strconv.Itoa(*seconds), "-delay", "300ms")
	if err != nil {
		return err
	}
	if err := cg.enter(cgDir, hog.pid()); err != nil {
		return err
	}
	t0 := time.Now().Add(300 * time.Millisecond) // the hog's first allocation
	pids := map[string]int{"lavender": lav.pid(), "node_exporter": ne.pid()}
	before := map[string]procSnapshot{"lavender": snapshot(lav.pid()), "node_exporter": snapshot(ne.pid())}

	runCtx, stop := context.WithTimeout(ctx, time.Duration(*seconds)*time.Second)
	defer stop()
	var wg sync.WaitGroup
	scrapes := map[string]*scrapeLog{"lavender": {}, "node_exporter": {}}
	for name, url := range map[string]string{"lavender": lavURL, "node_exporter": neURL} {
		wg.Go(func() { scrapes[name].loop(runCtx, url, *scrapeEvery, pids[name]) })
	}

	var (
		samples                []memSample
		pressureAt, swapAt     int = -1, -1 // index into samples
		pressurePush, swapPush time.Time
		hogDied                string
		tick                   = time.NewTicker(100 * time.Millisecond)
		stopAt                 time.Time
		pressureText, swapText string
	)
	defer tick.Stop()
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case <-hog.done:
			if hogDied == "" {
				hogDied = fmt.Sprintf("the hog exited after %.1f s: %v", time.Since(t0).Seconds(), hog.err)
				if stopAt.IsZero() {
					stopAt = time.Now().Add(3 * time.Second)
				}
			}
		case m := <-bark.messages:
			switch {
			case strings.Contains(m.text, "memory pressure") && pressurePush.IsZero():
				pressurePush, pressureText = m.at, m.text
			case strings.Contains(m.text, "swap") && strings.Contains(m.text, "full") && swapPush.IsZero():
				swapPush, swapText = m.at, m.text
				stopAt = m.at.Add(5 * time.Second) // a pressure push would have come first
			}
		case now := <-tick.C:
			s, serr := exporter.ReadSwap(ctx, "")
			p, perr := exporter.ReadPressure("")
			if serr != nil || perr != nil {
				return fmt.Errorf("read /proc: %v %v", serr, perr)
			}
			samples = append(samples, memSample{at: now, swap: s.UsedRatio, swapBytes: s.UsedBytes, some: p.SomeAvg10, full: p.FullAvg10})
			if pressureAt < 0 && p.SomeAvg10 >= *threshold {
				pressureAt = len(samples) - 1
			}
			if swapAt < 0 && s.UsedRatio >= 0.5 {
				swapAt = len(samples) - 1
			}
			if !stopAt.IsZero() && now.After(stopAt) {
				break loop
			}
		}
	}
	stop()
	wg.Wait()
	after := map[string]procSnapshot{"lavender": snapshot(lav.pid()), "node_exporter": snapshot(ne.pid())}
	hog.stop()

	fmt.Printf("A %d MiB swap file (%s), a hog allocating %d MiB at %d MiB/s and touching it at random, in a %d MiB memory cgroup (%s). "+
		"`lavender serve` at its defaults (watchdog every 5 s) and `node_exporter --collector.disable-defaults --collector.meminfo "+
		"--collector.vmstat --collector.pressure` run inside the same cgroup; each is scraped every %s. Times are seconds after the "+
		"hog's first allocation; PSI and swap sampled every 100 ms from /proc.\n\n",
		*swapMiB, *swapFile, *hogMiB, *hogRate, *memMaxMiB, cg.version, *scrapeEvery)
	if *lavenderArgs != "" {
		fmt.Printf("lavender's extra arguments: `%s`.\n\n", *lavenderArgs)
	}
	fmt.Println("| event | at | PSI some avg10 | PSI full avg10 | swap used |")
	fmt.Println("|---|---|---|---|---|")
	row := func(what string, i int) {
		if i < 0 {
			fmt.Printf("| %s | never | | | |\n", what)
			return
		}
		s := samples[i]
		fmt.Printf("| %s | %.1f s | %.1f %% | %.1f %% | %.0f %% (%.2f GiB) |\n", what, s.at.Sub(t0).Seconds(),
			s.some*100, s.full*100, s.swap*100, float64(s.swapBytes)/(1<<30))
	}
	push := func(what string, at time.Time, cond int, text string) {
		switch {
		case at.IsZero():
			fmt.Printf("| %s | no push | | | |\n", what)
		case cond >= 0:
			fmt.Printf("| %s | %.1f s (%.1f s after the crossing): %q | | | |\n", what, at.Sub(t0).Seconds(),
				at.Sub(samples[cond].at).Seconds(), text)
		default:
			fmt.Printf("| %s | %.1f s: %q | | | |\n", what, at.Sub(t0).Seconds(), text)
		}
	}
	row(fmt.Sprintf("pressure (some avg10) ≥ %.0f %%", *threshold*100), pressureAt)
	push("push with \"memory pressure\"", pressurePush, pressureAt, pressureText)
	row("swap ≥ 50 %", swapAt)
	push("swap push", swapPush, swapAt, swapText)
	fmt.Println()
	if pressureAt >= 0 && swapAt >= 0 {
		fmt.Printf("Lead of the pressure crossing over the swap crossing: **%.1f s**.\n", samples[swapAt].at.Sub(samples[pressureAt].at).Seconds())
	}
	if !pressurePush.IsZero() && !swapPush.IsZero() {
		fmt.Printf("Lead of the pressure push over the swap push: **%.1f s**.\n", swapPush.Sub(pressurePush).Seconds())
	}
	peakSome, peakFull, peakSwap := 0.0, 0.0, 0.0
	for _, s := range samples {
		peakSome, peakFull, peakSwap = max(peakSome, s.some), max(peakFull, s.full), max(peakSwap, s.swap)
	}
	fmt.Printf("Peaks: PSI some avg10 %.1f %%, full avg10 %.1f %%, swap %.0f %%; %d samples over %.1f s.\n",
		peakSome*100, peakFull*100, peakSwap*100, len(samples), samples[len(samples)-1].at.Sub(t0).Seconds())
	if hogDied != "" {
		fmt.Printf("Note: %s\n", hogDied)
	}
	fmt.Println()
	fmt.Println("| program (inside the cgroup) | scrapes | failed | p50 | p99 | max |")
	fmt.Println("|---|---|---|---|---|---|")
	var p99 [2]time.Duration
	for i, name := range []string{"lavender", "node_exporter"} {
		l := scrapes[name]
		d := l.took.sorted()
		p99[i] = d.pct(99)
		var worst time.Duration
		if len(d) > 0 {
			worst = d[len(d)-1]
		}
		fmt.Printf("| %s | %d | %d | %s | %s | %s |\n", name, len(d), l.failed, ms(d.pct(50)), ms(p99[i]), ms(worst))
	}
	if p99[1] > 0 {
		fmt.Printf("\nScrape p99 lavender / node_exporter: **%.2f** (goal ≤ 0.25).\n", float64(p99[0])/float64(p99[1]))
	}
	fmt.Println()
	printScrapeCauses(scrapes)
	printProcTable(before, after)
	return nil
}

// printScrapeCauses splits the scrapes' time into time on a CPU, time
// waiting for one, and the rest (off the CPU: a fault's I/O, the network),
// with the major faults taken during them: for all scrapes, and for the
// slowest 5 % (at least 3), which make the p99.
func printScrapeCauses(scrapes map[string]*scrapeLog) {
	fmt.Println("| program | scrapes | mean time | on CPU | run-queue wait | off CPU (rest) | major faults |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, name := range []string{"lavender", "node_exporter"} {
		recs := slices.Clone(scrapes[name].recs)
		slices.SortFunc(recs, func(a, b scrapeRec) int { return cmp.Compare(b.took, a.took) })
		slow := recs[:min(len(recs), max(3, len(recs)/20))]
		for _, g := range []struct {
			what string
			recs []scrapeRec
		}{{"all", recs}, {"slowest", slow}} {
			if len(g.recs) == 0 {
				continue
			}
			var took, run, wait time.Duration
			var majflt int64
			for _, r := range g.recs {
				took, run, wait, majflt = took+r.took, run+r.d.run, wait+r.d.wait, majflt+r.d.majflt
			}
			n := time.Duration(len(g.recs))
			fmt.Printf("| %s, %s | %d | %s | %s | %s | %s | %d (%.1f per scrape) |\n", name, g.what, len(g.recs),
				ms(took/n), ms(run/n), ms(wait/n), ms(max(0, took-run-wait)/n), majflt, float64(majflt)/float64(len(g.recs)))
		}
	}
	fmt.Println()
}

// printProcTable shows each program's memory before the hog started and
// when the thrash ended (VmLck: what a variant that calls mlockall locked,
// all of it charged to the cgroup and never swapped), and its faults and
// preemptions in between.
func printProcTable(before, after map[string]procSnapshot) {
	fmt.Println("| program | VmRSS before → after | VmLck | VmSwap after | major faults | minor faults | on CPU | run-queue wait | preemptions |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, name := range []string{"lavender", "node_exporter"} {
		b, a := before[name], after[name]
		d := a.counters.sub(b.counters)
		fmt.Printf("| %s | %s → %s | %s | %s | %d | %d | %s | %s | %d |\n", name,
			mib(int(b.status["VmRSS"])), mib(int(a.status["VmRSS"])), mib(int(a.status["VmLck"])), mib(int(a.status["VmSwap"])),
			d.majflt, d.minflt, ms(d.run), ms(d.wait), a.status["nonvoluntary_ctxt_switches"]-b.status["nonvoluntary_ctxt_switches"])
	}
	fmt.Println()
}

type memSample struct {
	at               time.Time
	swap, some, full float64
	swapBytes        uint64
}

// scrapeLog times sequential scrapes of one exporter. Failed scrapes (a
// timeout under thrash) are counted, not timed.
type scrapeLog struct {
	took   durations
	recs   []scrapeRec
	failed int
}

// scrapeRec is one scrape with what the server's process did meanwhile.
type scrapeRec struct {
	took time.Duration
	d    procCounters
}

func (l *scrapeLog) loop(ctx context.Context, url string, every time.Duration, pid int) {
	client := &http.Client{Timeout: 10 * time.Second}
	hdr := map[string]string{"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}
	for ctx.Err() == nil {
		c0, _ := readProcCounters(pid)
		t0 := time.Now()
		_, err := get(client, url, hdr)
		took := time.Since(t0)
		c1, _ := readProcCounters(pid)
		if err != nil {
			if ctx.Err() == nil {
				l.failed++
			}
		} else {
			l.took = append(l.took, took)
			l.recs = append(l.recs, scrapeRec{took, c1.sub(c0)})
		}
		if sleepCtx(ctx, every) != nil {
			return
		}
	}
}

// pressurePrereqs says why this machine cannot run the thrash, or returns
// the memory cgroup to use.
func pressurePrereqs(swapFile string, swapMiB int) (memCgroup, string) {
	if os.Geteuid() != 0 {
		return memCgroup{}, "needs root (swapon, and a memory cgroup)"
	}
	if p, err := exporter.ReadPressure(""); err != nil || !p.Available {
		return memCgroup{}, fmt.Sprintf("the kernel has no memory PSI (/proc/pressure/memory: %v)", err)
	}
	for _, tool := range []string{"mkswap", "swapon", "swapoff"} {
		if _, err := exec.LookPath(tool); err != nil {
			return memCgroup{}, fmt.Sprintf("no %s on PATH (Debian package util-linux)", tool)
		}
	}
	swaps, err := os.ReadFile("/proc/swaps")
	if err != nil {
		return memCgroup{}, fmt.Sprintf("cannot read /proc/swaps: %v", err)
	}
	if lines := strings.Split(strings.TrimSpace(string(swaps)), "\n"); len(lines) > 1 {
		return memCgroup{}, fmt.Sprintf("swap is already active (%s): the 50 %% crossing would not be the test file's alone", strings.Fields(lines[1])[0])
	}
	if _, err := os.Stat(swapFile); err == nil {
		return memCgroup{}, fmt.Sprintf("%s already exists; remove it if a killed run left it behind", swapFile)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(swapFile), &st); err != nil {
		return memCgroup{}, fmt.Sprintf("statfs %s: %v", filepath.Dir(swapFile), err)
	}
	if free := st.Bavail * uint64(st.Bsize); free < uint64(swapMiB+1024)<<20 {
		return memCgroup{}, fmt.Sprintf("%s has %d MiB free, the swap file needs %d MiB and 1 GiB to spare", filepath.Dir(swapFile), free>>20, swapMiB)
	}
	cg, err := findMemCgroup()
	if err != nil {
		return memCgroup{}, err.Error()
	}
	return cg, ""
}

// memCgroup is the memory controller's hierarchy: cgroup v2's unified one
// where it has the memory controller, else cgroup v1's memory hierarchy.
type memCgroup struct {
	version string // "cgroup v2" or "cgroup v1"
	root    string
}

func findMemCgroup() (memCgroup, error) {
	if c, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(" "+string(c)+" ", " memory") {
		return memCgroup{"cgroup v2", "/sys/fs/cgroup"}, nil
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		return memCgroup{"cgroup v1", "/sys/fs/cgroup/memory"}, nil
	}
	return memCgroup{}, errors.New("no memory cgroup: neither cgroup v2 with the memory controller at /sys/fs/cgroup nor cgroup v1's /sys/fs/cgroup/memory")
}

func (c memCgroup) create(name string, memMaxMiB int) (string, error) {
	dir := filepath.Join(c.root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("create cgroup: %w", err)
	}
	limit := strconv.Itoa(memMaxMiB << 20)
	var files map[string]string
	if c.version == "cgroup v2" {
		files = map[string]string{"memory.max": limit, "memory.swap.max": "max"}
	} else {
		files = map[string]string{"memory.limit_in_bytes": limit}
	}
	for f, v := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
			os.Remove(dir)
			return "", fmt.Errorf("cgroup %s: %w", f, err)
		}
	}
	return dir, nil
}

func (c memCgroup) enter(dir string, pid int) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("move pid %d into %s: %w", pid, dir, err)
	}
	return nil
}

// remove kills what is left in the cgroup (only lavbench's children ever
// entered it) and removes it, waiting up to 10 s for the processes to go.
func (c memCgroup) remove(dir string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		pids := strings.Fields(string(data))
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "pressure: remove cgroup %s: %v\n", dir, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// makeSwapFile writes a swap file of real blocks (swapon refuses holes)
// and formats it.
func makeSwapFile(path string, mib int) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create swap file: %w", err)
	}
	chunk := make([]byte, 1<<20)
	for range mib {
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return fmt.Errorf("write swap file: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync swap file: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if out, err := exec.Command("mkswap", path).CombinedOutput(); err != nil {
		return fmt.Errorf("mkswap %s: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// runPressureHog allocates memory at a steady rate up to a total and keeps
// writing to random pages of it, so that its pages cycle through swap: the
// working set of a training run that no longer fits.
func runPressureHog(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pressure-hog", flag.ContinueOnError)
	mib := fs.Int("mib", 1536, "total to allocate")
	rate := fs.Int("rate-mib", 48, "MiB per second")
	seconds := fs.Int("seconds", 150, "exit after this long")
	delay := fs.Duration("delay", 0, "wait before the first allocation")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mib < 1 || *mib > 65536 || *rate < 1 || *seconds < 1 || *seconds > 600 {
		return fmt.Errorf("mib 1-65536, rate-mib >= 1, seconds 1-600")
	}
	debug.SetGCPercent(-1) // nothing is ever freed; the heap is all noscan bytes
	if err := sleepCtx(ctx, *delay); err != nil {
		return nil
	}
	const chunk, page = 4 << 20, 4096
	start := time.Now()
	deadline := start.Add(time.Duration(*seconds) * time.Second)
	var chunks [][]byte
	for ctx.Err() == nil && time.Now().Before(deadline) {
		due := min(*mib, int(time.Since(start).Seconds()*float64(*rate))+4) / 4 // chunks that should exist by now
		for len(chunks) < due {
			c := make([]byte, chunk)
			for i := 0; i < len(c); i += page {
				c[i] = 1
			}
			chunks = append(chunks, c)
		}
		// Touch random pages of everything until the next chunk is due.
		for range 256 {
			c := chunks[rand.IntN(len(chunks))]
			c[rand.IntN(chunk/page)*page]++
		}
	}
	return nil
}
