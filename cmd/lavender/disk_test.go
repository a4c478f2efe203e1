package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/diskguard"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
)

const mib = 1 << 20

// startDiskServe is serve polling every 20 ms with the given disk flags;
// the host's own /dev/shm stays out unless a test asks for it.
func startDiskServe(t *testing.T, o serveOpts, args ...string) *watchdogRig {
	t.Helper()
	host := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.20)})
	r := startServeOpts(t, host, o, append([]string{"--watchdog.interval=20ms", "--watchdog.repeat=1h", "--watchdog.shm="}, args...)...)
	return &watchdogRig{serveRig: r, host: host}
}

// diskMetric is a lavender_disk_* series of the path, or -1 while absent.
func (r *watchdogRig) diskMetric(name, path string) float64 {
	r.t.Helper()
	v, err := testkit.Scrape(r.t, r.client, r.base+"/metrics").Value(name, testkit.Labels{"path": path})
	if err != nil {
		return -1
	}
	return v
}

// TestServeDiskTwoSavesOnATmpfs is the disk guard's main promise: on a 64
// MiB tmpfs a running phase writes to, the first 24 MiB save leaves room
// for the next and pushes
// nothing; the second leaves 16 MiB, and the push comes before a third is
// tried. Removing the checkpoints resolves it.
func TestServeDiskTwoSavesOnATmpfs(t *testing.T) {
	t.Parallel()
	dir := testkit.MountTmpfs(t, "size=64m")
	r := startDiskServe(t, serveOpts{}, "--watchdog.disk="+dir)
	save := func(i int) {
		t.Helper()
		if err := testkit.WriteFileOfSize(filepath.Join(dir, fmt.Sprintf("checkpoint-%d.pt", i)), 24*mib); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.diskMetric("lavender_disk_size_bytes", dir); got != 64*mib {
		t.Fatalf("lavender_disk_size_bytes = %v at ready, want 64 MiB", got)
	}
	// Saves are learned only from a filesystem a running phase writes to.
	r.beat("Train", `"event":"start","dirs":["`+dir+`"]`)
	save(1)
	// A poll may catch the write's first bytes before the jump shows; the
	// guard looks back a few polls for its base, but a writer held off the
	// CPU for longer leaves a little out (22.9 MiB once, under the race
	// detector beside the whole suite): within 2 MiB, the push below still
	// reads "24 MB".
	learned := func() bool { v := r.diskMetric("lavender_disk_save_bytes", dir); return v >= 22*mib && v <= 24*mib }
	if !testkit.Poll(20*time.Second, learned) {
		t.Fatalf("the guard learned a save of %v bytes, want 24 MiB", r.diskMetric("lavender_disk_save_bytes", dir))
	}
	r.waitPolls(3)
	if got := r.pushes(); len(got) != 0 {
		t.Fatalf("pushes after the first save (40 MiB free for a 24 MiB save): %q", got)
	}
	save(2)
	r.bark.WaitPushes(t, 1)
	got := r.pushes()[0]
	const tail = ": 16 MB free, a checkpoint save takes 24 MB — the next save will fail"
	if !strings.HasPrefix(got, "[lavender-2] disk ") || !strings.HasSuffix(got, tail) || !strings.Contains(got, "/tmpfs") {
		t.Fatalf("push %q, want [lavender-2] disk <dir>%s", got, tail)
	}
	r.waitPolls(5)
	if n := len(r.pushes()); n != 1 {
		t.Fatalf("%d pushes for one incident: %q", n, r.pushes())
	}
	if lines := r.barkLines(); len(lines) != 1 || !strings.HasPrefix(lines[0], "BARK disk save /") || !strings.HasSuffix(lines[0], " sent ok=1 fail=0") {
		t.Errorf("run log BARK lines %q", lines)
	}
	if v := r.metric("lavender_watchdog_rule_armed", testkit.Labels{"rule": "disk-space"}); v != 0 {
		t.Errorf("disk rule armed = %v during the incident", v)
	}
	for i := 1; i <= 2; i++ {
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("checkpoint-%d.pt", i))); err != nil {
			t.Fatal(err)
		}
	}
	r.bark.WaitPushes(t, 2)
	if got := r.pushes()[1]; !strings.HasPrefix(got, "[lavender-2] resolved: disk ") || !strings.Contains(got, " MB free after ") {
		t.Errorf("resolution %q", got)
	}
}

// inodesPush is the push of TestServeDiskInodes: the share, then the count.
var inodesPush = regexp.MustCompile(`: ([1-5])% of inodes free \(([123]) of 64\) — new files will fail$`)

// TestServeDiskInodes: a tmpfs of 64 inodes with 62 files has one left: a
// push about the inodes, though bytes are plenty.
func TestServeDiskInodes(t *testing.T) {
	t.Parallel()
	dir := testkit.MountTmpfs(t, "size=16m,nr_inodes=64")
	r := startDiskServe(t, serveOpts{}, "--watchdog.disk="+dir)
	r.waitPolls(2)
	for i := range 62 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("shard-%02d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.bark.WaitPushes(t, 1)
	// A poll may come while the files are being made: the push then says
	// what was free when it crossed 5 % (3.2 inodes), and a later poll
	// sees the last one.
	got := r.pushes()[0]
	if m := inodesPush.FindStringSubmatch(got); m == nil || (m[1] == "1") != (m[2] == "1") {
		t.Errorf("push %q, want it to say 1 (or, mid-write, 2 or 3) of 64 inodes free", got)
	}
	if !testkit.Poll(20*time.Second, func() bool { return r.diskMetric("lavender_disk_files_free", dir) == 1 }) {
		t.Errorf("lavender_disk_files_free = %v, want 1", r.diskMetric("lavender_disk_files_free", dir))
	}
	r.waitPolls(2)
	if n := len(r.pushes()); n != 1 {
		t.Errorf("%d pushes for one incident: %q", n, r.pushes())
	}
	if v := r.diskMetric("lavender_disk_files", dir); v != 64 {
		t.Errorf("lavender_disk_files = %v, want 64", v)
	}
}

// TestServeDiskShmByDefault: without flags /dev/shm is watched; the
// exporter command watches it too.
func TestServeDiskShmByDefault(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skipf("this host has no /dev/shm: %v", err)
	}
	host := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.20)})
	r := startServe(t, host)
	if v := r.metric("lavender_disk_size_bytes", testkit.Labels{"path": "/dev/shm"}); v <= 0 {
		t.Errorf("serve: /dev/shm size %v", v)
	}
	exp := startInProcess(t, nil, "exporter", "--path.procfs="+host.Dir, "--runlog.dir="+t.TempDir())
	if v := testkit.Scrape(t, exp.client, exp.base+"/metrics").MustValue(t, "lavender_disk_avail_bytes", testkit.Labels{"path": "/dev/shm"}); v < 0 {
		t.Errorf("exporter: /dev/shm avail %v", v)
	}
}

// hangingStatfs is the real statfs but for one path, whose calls block
// until the test ends, as on an NFS mount whose server is gone.
type hangingStatfs struct {
	path    string
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

func newHangingStatfs(t *testing.T, path string) *hangingStatfs {
	h := &hangingStatfs{path: path, release: make(chan struct{})}
	t.Cleanup(func() { close(h.release) })
	return h
}

func (h *hangingStatfs) stat(path string) (diskguard.Stat, error) {
	if path != h.path {
		return diskguard.Statfs(path)
	}
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	<-h.release
	return diskguard.Stat{}, fmt.Errorf("released")
}

// TestServeDiskHungStatfsDoesNotDelayTheSwapPush: a path whose statfs
// never returns is reported unreadable, is called once, and the swap rule
// pushes as ever. Were any poll to wait on the hung call, no push would
// come at all.
func TestServeDiskHungStatfsDoesNotDelayTheSwapPush(t *testing.T) {
	t.Parallel()
	hung := newHangingStatfs(t, "/mnt/nfs")
	r := startDiskServe(t, serveOpts{statfs: hung.stat}, "--watchdog.disk=/mnt/nfs")
	r.host.SetSwap(testkit.SwapAt(swap2GiBinKB, 0.56))
	r.bark.WaitPushes(t, 1)
	if got := r.pushes(); len(got) != 1 || got[0] != "[lavender-2] swap 56% full (1.1/2.0 GB) — consider intervening" {
		t.Fatalf("pushes %q", got)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.diskMetric("lavender_disk_error", "/mnt/nfs") == 1 }, "/mnt/nfs reported unreadable")
	r.waitPolls(5)
	hung.mu.Lock()
	calls := hung.calls
	hung.mu.Unlock()
	if calls != 1 {
		t.Errorf("the hung path was called %d times; hung calls must not pile up", calls)
	}
	if !strings.Contains(r.logs.String(), "statfs did not answer") {
		t.Errorf("log does not say the statfs hung:\n%s", r.logs)
	}
}

// TestServeDiskHungPushesOnceAndItsEnd: on serve's clock, a path whose
// statfs has not answered for a minute pushes once, saying so; once the
// call returns and the path reads again, the resolution follows.
func TestServeDiskHungPushesOnceAndItsEnd(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	hung := newHangingStatfs(t, "/mnt/nfs")
	answered := make(chan struct{})
	stat := func(path string) (diskguard.Stat, error) {
		if path != hung.path {
			return diskguard.Statfs(path)
		}
		select {
		case <-answered:
			return diskguard.Stat{Dev: 1 << 41, Size: 100 << 30, Free: 50 << 30, Avail: 50 << 30, Files: 1 << 20, FilesFree: 1 << 19}, nil
		default:
		}
		return hung.stat(path)
	}
	r := startDiskServe(t, serveOpts{clock: clock.Now, statfs: stat}, "--watchdog.disk=/mnt/nfs")
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.diskMetric("lavender_disk_error", "/mnt/nfs") == 1 }, "/mnt/nfs reported unreadable")
	clock.Advance(30 * time.Second)
	r.waitPolls(5)
	if got := r.pushes(); len(got) != 0 {
		t.Fatalf("pushes after 30 s hung: %q", got)
	}
	clock.Advance(31 * time.Second)
	r.bark.WaitPushes(t, 1)
	r.waitPolls(5)
	if got := r.pushes(); len(got) != 1 || got[0] != "[lavender-2] disk /mnt/nfs: statfs has not answered for 1m — a save there will hang" {
		t.Fatalf("pushes %q", got)
	}
	clock.Advance(2 * time.Minute)
	close(answered)
	hung.release <- struct{}{} // the hung call returns; the next one reads
	r.bark.WaitPushes(t, 2)
	if got := r.pushes()[1]; got != "[lavender-2] resolved: disk /mnt/nfs: answers again after 3m" {
		t.Errorf("resolution %q, want one that counts from when the path stopped answering", got)
	}
}

// TestServeDiskMissingPathAppears: a path that does not exist at the start
// is said so in the log and watched once it appears.
func TestServeDiskMissingPathAppears(t *testing.T) {
	t.Parallel()
	dir := testkit.MountTmpfs(t, "size=8m")
	later := filepath.Join(dir, "run-7")
	r := startDiskServe(t, serveOpts{}, "--watchdog.disk="+later)
	if !strings.Contains(r.logs.String(), "path does not exist yet; it is watched once it appears") {
		t.Errorf("the start does not say %s is watched once it appears:\n%s", later, r.logs)
	}
	if err := os.Mkdir(later, 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.diskMetric("lavender_disk_size_bytes", later) == 8*mib }, later+" watched once it appeared")
}

// TestServeDiskWatchesPhaseDirs: the directories a phase reports are
// watched, and a save it reports teaches the guard the save's size on the
// filesystem of its last directory.
func TestServeDiskWatchesPhaseDirs(t *testing.T) {
	t.Parallel()
	work := testkit.MountTmpfs(t, "size=8m")
	out := testkit.MountTmpfs(t, "size=32m")
	r := startDiskServe(t, serveOpts{})
	r.beat("Pretrain 1/3", `"event":"start","dirs":["`+work+`","`+out+`"]`)
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.diskMetric("lavender_disk_size_bytes", out) == 32*mib }, "the phase's output_dir watched")
	if v := r.diskMetric("lavender_disk_size_bytes", work); v != 8*mib {
		t.Errorf("the phase's cwd: size %v", v)
	}
	r.beat("Pretrain 1/3", `"event":"ping","save_bytes":31457280`) // 30 MiB
	r.bark.WaitPushes(t, 1)
	if got := r.pushes()[0]; !strings.HasSuffix(got, ": 32 MB free, a checkpoint save takes 30 MB — the next save will fail") {
		t.Errorf("push %q", got)
	}
	if v := r.diskMetric("lavender_disk_save_bytes", work); v != -1 {
		t.Errorf("the cwd's filesystem got the save too: %v", v)
	}
}

// TestPhaseStartAndRunSendTheWorkingDirectory: `lavender phase start` and
// `phase run` report their working directory, which the API then shows.
func TestPhaseStartAndRunSendTheWorkingDirectory(t *testing.T) {
	t.Parallel()
	base, _ := startExporter(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cli := parseCLI(t, "phase", "start", "Prep", "--url", base)
	if err := cli.Phase.Start.Run(testGlobals(&testkit.SyncBuffer{}, &testkit.SyncBuffer{})); err != nil {
		t.Fatal(err)
	}
	cli = parseCLI(t, "phase", "run", "Train", "--url", base, "--", "true")
	if code, err := cli.Phase.Run.run(t.Context(), testGlobals(&testkit.SyncBuffer{}, &testkit.SyncBuffer{}), strings.NewReader(""), nil); err != nil || code != 0 {
		t.Fatalf("phase run: %d, %v", code, err)
	}
	_, body := testkit.MustDo(t, nil, "GET", base+phaseapi.PhasesPath, nil, "", "")
	var resp phaseapi.PhasesResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Prep", "Train"} {
		i := slices.IndexFunc(resp.Phases, func(p phaseapi.Phase) bool { return p.Name == name })
		if i < 0 || !slices.Equal(resp.Phases[i].Dirs, []string{wd}) {
			t.Errorf("%s: %s", name, body)
		}
	}
}

// fakeDisk is a statfs of one filesystem whose free space the test sets.
type fakeDisk struct {
	path  string
	mu    sync.Mutex
	avail uint64
}

func (f *fakeDisk) set(avail uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.avail = avail
}

func (f *fakeDisk) stat(path string) (diskguard.Stat, error) {
	if path != f.path {
		return diskguard.Statfs(path)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	const size = 1000 << 30
	return diskguard.Stat{Dev: 1 << 40, Size: size, Free: f.avail, Avail: f.avail, Files: 1 << 20, FilesFree: 1 << 19}, nil
}

// TestServeDiskFillsBeforeTheETA: on serve's clock, /data loses 1 GiB a
// minute while "Pretrain 1/3" needs hours more; once ten minutes of rate
// are known, one push says when the disk fills and what the phase needs.
func TestServeDiskFillsBeforeTheETA(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	data := &fakeDisk{path: "/data"}
	const gi = 1 << 30
	avail := uint64(60 * gi)
	data.set(avail)
	host := testkit.NewProcfs(t, testkit.Host{Swap: testkit.SwapAt(swap2GiBinKB, 0.20)})
	r := &watchdogRig{serveRig: startServeOpts(t, host, serveOpts{clock: clock.Now, statfs: data.stat},
		"--watchdog.interval=20ms", "--watchdog.repeat=1h", "--watchdog.shm=", "--watchdog.disk=/data", "--watchdog.disk-min-free=0"), host: host}
	r.beat("Pretrain 1/3", `"event":"start","step":0,"total":100000,"dirs":["/data"]`)
	for minute := 1; minute <= 20 && len(r.pushes()) == 0; minute++ {
		clock.Advance(time.Minute)
		avail -= gi
		data.set(avail)
		r.beat("Pretrain 1/3", fmt.Sprintf(`"event":"ping","step":%d`, minute*100))
		r.waitPolls(3)
		if minute < 10 && len(r.pushes()) > 0 {
			t.Fatalf("a push after %dm, before ten minutes of rate: %q", minute, r.pushes())
		}
	}
	r.bark.WaitPushes(t, 1)
	got := r.pushes()[0]
	want := regexp.MustCompile(`^\[lavender-2\] disk /data: (\d+) GB free, fills in ~(\d+)m; "Pretrain 1/3" needs ~\d+h(\d+m)? more$`)
	m := want.FindStringSubmatch(got)
	if m == nil || m[1] != m[2] {
		t.Fatalf("push %q, want %s with as many minutes as GB (1 GiB a minute)", got, want)
	}
	t.Logf("push: %s", got)
	r.waitPolls(5)
	if n := len(r.pushes()); n != 1 {
		t.Errorf("%d pushes for one incident: %q", n, r.pushes())
	}
}

// TestServeDiskRunningPhaseWinsOverEndedOnes: four ended phases reported
// eight directories each on one filesystem, then "Train" starts with its
// directory on a small tmpfs and fills it. The ended phases' directories
// are released, so Train's is watched and its filling pushes; nothing is
// left unwatched.
func TestServeDiskRunningPhaseWinsOverEndedOnes(t *testing.T) {
	t.Parallel()
	scratch := testkit.MountTmpfs(t, "size=8m")
	// The phases' own pushes (done) are not what this test reads.
	r := startDiskServe(t, serveOpts{}, "--watchdog.disk-min-free=10%", "--phase.notify=failed,stalled,loss")
	old := t.TempDir()
	for i := range 4 {
		var dirs []string
		for j := range 8 {
			d := filepath.Join(old, fmt.Sprintf("prep-%d-%d", i, j))
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, `"`+d+`"`)
		}
		name := fmt.Sprintf("Prep %d", i)
		r.beat(name, `"event":"start","dirs":[`+strings.Join(dirs, ",")+`]`)
		r.beat(name, `"event":"end"`)
	}
	r.beat("Train", `"event":"start","dirs":["`+scratch+`"]`)
	testkit.WaitFor(t, 20*time.Second, func() bool { return r.diskMetric("lavender_disk_size_bytes", scratch) == 8*mib }, "Train's tmpfs watched")
	if err := testkit.WriteFileOfSize(filepath.Join(scratch, "shard.bin"), 8*mib-64<<10); err != nil {
		t.Fatal(err)
	}
	r.bark.WaitPushes(t, 1)
	// The push keeps a long path's end.
	if got := r.pushes()[0]; !strings.HasPrefix(got, "[lavender-2] disk ") || !strings.Contains(got, "/tmpfs: ") || !strings.HasSuffix(got, "under the 10% floor") {
		t.Errorf("push %q, want the floor of %s", got, scratch)
	}
	if v := r.metric("lavender_disk_unwatched_paths", nil); v != 0 {
		t.Errorf("lavender_disk_unwatched_paths = %v, want 0", v)
	}
}

// TestServeStopDoesNotWaitForAHungStatfs: in process, with a statfs that
// never returns until the test ends, the stop sends the alerts storm
// control held and returns: no part of it waits for the hung call.
func TestServeStopDoesNotWaitForAHungStatfs(t *testing.T) {
	t.Parallel()
	hung := newHangingStatfs(t, "/mnt/nfs")
	bark := barktest.New(t)
	barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.Template(barktest.Key) + "\n"})
	serve := startInProcessWith(t, Globals{Statfs: hung.stat}, "serve", "--runlog.dir="+t.TempDir(), "--bark.config-dir="+barkDir,
		"--bark.max-per-minute=2", "--bark.timeout=5s", "--path.procfs="+testkit.SwapProcfs(t, 0.10), "--watchdog.interval=20ms",
		"--watchdog.shm=", "--watchdog.disk=/mnt/nfs")
	testkit.WaitFor(t, 20*time.Second, func() bool {
		v, err := testkit.Scrape(t, serve.client, serve.base+"/metrics").Value("lavender_disk_error", testkit.Labels{"path": "/mnt/nfs"})
		return err == nil && v == 1
	}, "/mnt/nfs reported unreadable")
	testkit.PostSwapStorm(t, serve.base, 5)
	if err := serve.stop(); err != nil {
		t.Fatal(err)
	}
	if got := bark.Pushes(); len(got) != 3 || got[2].Body != "[lavender-2] 3 more alerts in the last minute: SwapUsageHigh ×3" {
		t.Errorf("pushes %+v, want the 2 sent and the summary of the 3 held", got)
	}
	hung.mu.Lock()
	defer hung.mu.Unlock()
	if hung.calls != 1 {
		t.Errorf("the hung path was called %d times, want once", hung.calls)
	}
}
