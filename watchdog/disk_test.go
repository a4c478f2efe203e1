package watchdog

import (
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

const (
	mib = 1 << 20
	gi  = 1 << 30
)

func newDiskRule(t *testing.T, minFree string) *DiskRule {
	t.Helper()
	floor, err := ParseMinFree(minFree)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewDiskRule(DiskConfig{MinFree: floor, Repeat: 10 * time.Minute, Retry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// observeDelivered is a poll whose pushes all reach a phone.
func observeDelivered(r Rule, s Sample, now time.Time) []Alert {
	out := r.Observe(s, now)
	for _, a := range out {
		r.Pushed(a, true, now)
	}
	return out
}

func kinds(alerts []Alert) []string {
	var out []string
	for _, a := range alerts {
		out = append(out, string(a.Status)+" "+string(a.DiskKind)+" "+a.Disk.Path)
	}
	return out
}

func tmpfs64(avail uint64) Disk {
	return Disk{Path: "/data", SizeBytes: 64 * mib, AvailBytes: avail, SaveBytes: 24 * mib, Files: 16384, FilesFree: 16000}
}

// TestDiskSaveRule: with 24 MiB saves on 64 MiB, the 40 MiB left by the
// first fits the next save, the 16 MiB left by the second does not: one
// push, none while it lasts, and the resolution only once free space is
// a quarter over a save and its margin.
func TestDiskSaveRule(t *testing.T) {
	r := newDiskRule(t, "0")
	now := t0
	step := func(avail uint64) []string {
		now = now.Add(5 * time.Second)
		return kinds(observeDelivered(r, Sample{Disks: []Disk{tmpfs64(avail)}}, now))
	}
	if got := step(40 * mib); got != nil {
		t.Fatalf("after one save: %v", got)
	}
	// While the second is written the free space says nothing yet.
	saving := tmpfs64(26 * mib)
	saving.Saving = true
	now = now.Add(5 * time.Second)
	if got := observeDelivered(r, Sample{Disks: []Disk{saving}}, now); got != nil {
		t.Fatalf("during the second save: %v", kinds(got))
	}
	if got := step(16 * mib); len(got) != 1 || got[0] != "firing save /data" {
		t.Fatalf("after two saves: %v", got)
	}
	if st := r.State(); st.Armed || !st.Since.Equal(now) {
		t.Errorf("state %+v after the push", st)
	}
	for range 200 {
		if got := step(16 * mib); got != nil {
			t.Fatalf("a second push in the same incident: %v", got)
		}
	}
	// 24 MiB × 1.1 = 26.4 MiB needed; resolved once free exceeds 26.4/0.8 = 33 MiB.
	if got := step(32 * mib); got != nil {
		t.Fatalf("inside the hysteresis: %v", got)
	}
	if got := step(34 * mib); len(got) != 1 || got[0] != "resolved save /data" {
		t.Fatalf("clearly over: %v", got)
	}
	if !r.State().Armed {
		t.Error("not armed after the resolution")
	}
	if got := step(26 * mib); len(got) != 1 || got[0] != "firing save /data" {
		t.Fatalf("a new incident: %v", got)
	}
}

// TestDiskUnreadableRule: a path statfs cannot read pushes once it has
// been unreadable for DiskUnreadableAfter, not before and not again while
// it lasts; a full disk's incident is kept meanwhile (its figures are
// unknown, not good); read again, the path pushes its resolution and the
// full disk's incident goes on, unpushed.
func TestDiskUnreadableRule(t *testing.T) {
	r := newDiskRule(t, "0")
	now := t0
	poll := func(after time.Duration, s Sample) []string {
		now = now.Add(after)
		return kinds(observeDelivered(r, s, now))
	}
	if got := poll(0, Sample{Disks: []Disk{tmpfs64(16 * mib)}}); len(got) != 1 || got[0] != "firing save /data" {
		t.Fatalf("a full disk: %v", got)
	}
	since := now
	hung := Sample{UnreadableDisks: []Disk{{Path: "/data", Hung: true, ErrSince: since, Err: "statfs did not answer within 2s"}}}
	for range 11 { // 55 s
		if got := poll(5*time.Second, hung); got != nil {
			t.Fatalf("%s unreadable: %v, want nothing before %s", now.Sub(since), got, DiskUnreadableAfter)
		}
	}
	got := r.Observe(hung, now.Add(5*time.Second))
	now = now.Add(5 * time.Second)
	if len(got) != 1 || got[0].DiskKind != DiskUnreadable || got[0].Status != Firing || !got[0].Disk.Hung || got[0].Disk.Path != "/data" {
		t.Fatalf("a minute unreadable: %+v", got)
	}
	r.Pushed(got[0], true, now)
	for range 100 {
		if got := poll(5*time.Second, hung); got != nil {
			t.Fatalf("a second push while it lasts: %v", got)
		}
	}
	if got := poll(5*time.Second, Sample{Disks: []Disk{tmpfs64(16 * mib)}}); len(got) != 1 || got[0] != "resolved unreadable /data" {
		t.Fatalf("read again: %v, want the unreadable incident's resolution alone", got)
	}
	if got := poll(5*time.Second, Sample{Disks: []Disk{tmpfs64(34 * mib)}}); len(got) != 1 || got[0] != "resolved save /data" {
		t.Fatalf("the full disk's incident was lost while unreadable: %v", got)
	}
	// A path unreadable for less than the minute and read again says
	// nothing at all.
	brief := Sample{UnreadableDisks: []Disk{{Path: "/data", Err: "statfs /data: input/output error", ErrSince: now}}}
	if got := poll(30*time.Second, brief); got != nil {
		t.Fatalf("30 s unreadable: %v", got)
	}
	if got := poll(5*time.Second, Sample{Disks: []Disk{tmpfs64(34 * mib)}}); got != nil {
		t.Fatalf("read again after 35 s: %v, want nothing", got)
	}
	// A phase's directory that hung, pushed, and was then released (its
	// phase ended) never read again: nothing says it answers again. Read
	// through another path of its filesystem, it does.
	for _, tc := range []struct {
		after Sample
		want  string
	}{
		{Sample{Disks: []Disk{tmpfs64(34 * mib)}}, ""},
		{Sample{Disks: []Disk{{Path: "/data", Paths: []string{"/data", "/data/run"}, SizeBytes: 64 * mib, AvailBytes: 34 * mib}}}, "resolved unreadable /data/run"},
	} {
		since := now
		hung := Sample{Disks: []Disk{tmpfs64(34 * mib)}, UnreadableDisks: []Disk{{Path: "/data/run", Hung: true, ErrSince: since, Err: "statfs did not answer within 2s"}}}
		poll(30*time.Second, hung)
		got := r.Observe(hung, now.Add(31*time.Second))
		now = now.Add(31 * time.Second)
		if len(got) != 1 || got[0].Status != Firing || got[0].Disk.Path != "/data/run" {
			t.Fatalf("a minute unreadable: %+v", got)
		}
		r.Pushed(got[0], true, now)
		if got := strings.Join(poll(5*time.Second, tc.after), ","); got != tc.want {
			t.Errorf("after %+v: %q, want %q", tc.after.Disks, got, tc.want)
		}
		if got := poll(5*time.Second, tc.after); got != nil {
			t.Errorf("the poll after: %v", got)
		}
	}
}

// TestDiskSaveRuleNeedsASaveSize: without a known save size the rule is
// silent, however little is free (the floor is for that).
func TestDiskSaveRuleNeedsASaveSize(t *testing.T) {
	r := newDiskRule(t, "0")
	d := tmpfs64(mib)
	d.SaveBytes = 0
	if got := observeDelivered(r, Sample{Disks: []Disk{d}}, t0); got != nil {
		t.Errorf("pushes %v", kinds(got))
	}
}

// TestDiskFloorAndInodes: free space under the floor (a share or a size)
// and inodes under 5% each push once; two filesystems are apart.
func TestDiskFloorAndInodes(t *testing.T) {
	r := newDiskRule(t, "5%")
	shm := Disk{Path: "/dev/shm", SizeBytes: 64 * mib, AvailBytes: 3 * mib, Files: 100, FilesFree: 50}
	data := Disk{Path: "/data", SizeBytes: 100 * gi, AvailBytes: 50 * gi, Files: 1000, FilesFree: 40}
	got := kinds(observeDelivered(r, Sample{Disks: []Disk{shm, data}}, t0))
	if len(got) != 2 || got[0] != "firing floor /dev/shm" || got[1] != "firing inodes /data" {
		t.Fatalf("pushes %v", got)
	}
	if got := observeDelivered(r, Sample{Disks: []Disk{shm, data}}, t0.Add(time.Minute)); got != nil {
		t.Fatalf("again: %v", kinds(got))
	}
	shm.AvailBytes, data.FilesFree = 39*mib/10, 60 // 5% of 64 MiB over 3.9 MiB, 50 over 60 inodes: over 0.8, not yet clearly over
	if got := observeDelivered(r, Sample{Disks: []Disk{shm, data}}, t0.Add(2*time.Minute)); got != nil {
		t.Fatalf("inside the hysteresis: %v", kinds(got))
	}
	shm.AvailBytes = 5 * mib
	if got := kinds(observeDelivered(r, Sample{Disks: []Disk{shm, data}}, t0.Add(3*time.Minute))); len(got) != 1 || got[0] != "resolved floor /dev/shm" {
		t.Fatalf("shm clearly over the floor: %v", got)
	}

	sized := newDiskRule(t, "10GB")
	data = Disk{Path: "/data", SizeBytes: 1000 * gi, AvailBytes: 9 * gi}
	if got := kinds(observeDelivered(sized, Sample{Disks: []Disk{data}}, t0)); len(got) != 1 || got[0] != "firing floor /data" {
		t.Fatalf("9 GiB under a 10 GB floor: %v", got)
	}
}

// TestDiskFillRuleAgainstTheETA pins the fill rule: at 1 GiB a minute, 40
// GiB last 40 minutes, which pushes for a phase that needs 2h10m and not
// for one that needs 30m; the phase writing to the disk is the one named.
func TestDiskFillRuleAgainstTheETA(t *testing.T) {
	seconds := func(d time.Duration) *float64 { s := d.Seconds(); return &s }
	filling := Disk{Path: "/data", SizeBytes: 1000 * gi, AvailBytes: 40 * gi, FillRate: gi / 60.0, RateSpan: 30 * time.Minute, Writers: []string{"Finetune"}}
	phases := func(etaPretrain, etaFinetune time.Duration) []phaseapi.Phase {
		return []phaseapi.Phase{
			{Name: "Pretrain 1/3", Status: phaseapi.StatusActive, Started: t0, Progress: phaseapi.Progress{ETASeconds: seconds(etaPretrain)}},
			{Name: "Finetune", Status: phaseapi.StatusActive, Started: t0.Add(-time.Hour), Progress: phaseapi.Progress{ETASeconds: seconds(etaFinetune)}},
		}
	}
	r := newDiskRule(t, "0")
	if got := observeDelivered(r, Sample{Disks: []Disk{filling}, Phases: phases(5*time.Hour, 30*time.Minute)}, t0); got != nil {
		t.Fatalf("the writing phase needs 30m of the disk's 40m: %v", kinds(got))
	}
	got := observeDelivered(r, Sample{Disks: []Disk{filling}, Phases: phases(time.Hour, 2*time.Hour+10*time.Minute)}, t0.Add(time.Minute))
	if len(got) != 1 || got[0].DiskKind != DiskFill || got[0].Phase != "Finetune" || got[0].ETA != 2*time.Hour+10*time.Minute {
		t.Fatalf("pushes %+v", got)
	}
	if fills, ok := got[0].Disk.FillsIn(); !ok || fills != 40*time.Minute {
		t.Errorf("fills in %s, want 40m", fills)
	}

	// No phase writes to it: the phase that needs longest is named.
	r = newDiskRule(t, "0")
	filling.Writers = nil
	got = observeDelivered(r, Sample{Disks: []Disk{filling}, Phases: phases(time.Hour, 50*time.Minute)}, t0)
	if len(got) != 1 || got[0].Phase != "Pretrain 1/3" {
		t.Fatalf("pushes %+v", got)
	}
	// The rate unknown, or the disk emptying, or no ETA: resolved.
	unknown := filling
	unknown.RateSpan = 0
	if got := kinds(observeDelivered(r, Sample{Disks: []Disk{unknown}, Phases: phases(time.Hour, 0)}, t0.Add(time.Minute))); len(got) != 1 || got[0] != "resolved fill /data" {
		t.Fatalf("rate unknown: %v", got)
	}
	// Inside the hysteresis (ETA 33m of 40m) a new incident does not begin; past it, it does.
	if got := observeDelivered(r, Sample{Disks: []Disk{filling}, Phases: phases(33*time.Minute, 0)}, t0.Add(2*time.Minute)); got != nil {
		t.Fatalf("33m of 40m: %v", kinds(got))
	}
}

// TestDiskRuleRetriesWithABackoff: a push no target took is retried from
// the poll interval, doubling, capped at the repeat.
func TestDiskRuleRetriesWithABackoff(t *testing.T) {
	r := newDiskRule(t, "0")
	s := Sample{Disks: []Disk{tmpfs64(mib)}}
	now := t0
	var retries []time.Duration
	last := now
	for now.Before(t0.Add(2 * time.Hour)) {
		for _, a := range r.Observe(s, now) {
			if a.Status != Firing {
				t.Fatalf("status %s", a.Status)
			}
			if now != t0 {
				retries = append(retries, now.Sub(last))
			}
			last = now
			r.Pushed(a, false, now)
		}
		now = now.Add(time.Second)
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 320 * time.Second, 10 * time.Minute}
	for i, w := range want {
		if i >= len(retries) || retries[i] != w {
			t.Fatalf("retries %v, want to start %v", retries, want)
		}
	}
	if got := observeDelivered(r, s, now.Add(time.Hour)); len(got) != 1 || got[0].Status != Firing {
		t.Fatalf("the retry that reaches a phone: %v", kinds(got))
	}
	if got := observeDelivered(r, s, now.Add(3*time.Hour)); got != nil {
		t.Fatalf("after delivery: %v", kinds(got))
	}
}

func TestParseMinFree(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want MinFree
	}{
		{"5%", MinFree{Ratio: 0.05, Num: 5, Unit: "%"}}, {" 0.5 % ", MinFree{Ratio: 0.005, Num: 0.5, Unit: "%"}}, {"0", MinFree{}},
		{"10GB", MinFree{Bytes: 10e9, Num: 10, Unit: "GB"}}, {"10gb", MinFree{Bytes: 10e9, Num: 10, Unit: "GB"}},
		{"512MiB", MinFree{Bytes: 512 << 20, Num: 512, Unit: "MiB"}}, {"2G", MinFree{Bytes: 2 << 30, Num: 2, Unit: "G"}},
		{"1.5TB", MinFree{Bytes: 1.5e12, Num: 1.5, Unit: "TB"}}, {"4096B", MinFree{Bytes: 4096, Num: 4096, Unit: "B"}},
		{"100kb", MinFree{Bytes: 100e3, Num: 100, Unit: "kB"}},
	} {
		if got, err := ParseMinFree(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseMinFree(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "5", "100%", "0%", "-1GB", "GB", "ten GB", "5%%", "1e30TB"} {
		if _, err := ParseMinFree(in); err == nil {
			t.Errorf("ParseMinFree(%q) took it", in)
		}
	}
	if _, err := ParseMinFree("5"); err == nil || err.Error() != `--watchdog.disk-min-free: "5" has no unit; want a percentage such as 5% or a size such as 10GB` {
		t.Errorf("error: %v", err)
	}
}
