package watchdog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/diskguard"
)

// TestWithDisks: every filesystem the guard read reaches the sample with
// all its facts, after what the host reader put there; a failed read
// passes its error on and takes no disks.
func TestWithDisks(t *testing.T) {
	snap := diskguard.Snapshot{Filesystems: []diskguard.Filesystem{
		{Path: "/data", Paths: []string{"/data", "/data/run"}, Stat: diskguard.Stat{Size: 100 << 30, Avail: 5 << 30, Files: 1000, FilesFree: 40},
			Writers: []string{"Pretrain"}, SaveBytes: 2 << 30, SaveReported: true, Saving: true, Rate: 1 << 20, RateSpan: 10 * time.Minute},
		{Path: "/dev/shm", Stat: diskguard.Stat{Size: 1 << 30, Avail: 1 << 30}},
	}, Missing: []string{"/ckpt"}}
	host := func(context.Context) (Sample, error) {
		return Sample{Swap: Swap{Ratio: 0.5}}, nil
	}
	s, err := WithDisks(host, func() diskguard.Snapshot { return snap })(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []Disk{
		{Path: "/data", SizeBytes: 100 << 30, AvailBytes: 5 << 30, Files: 1000, FilesFree: 40, SaveBytes: 2 << 30, SaveReported: true,
			Saving: true, FillRate: 1 << 20, RateSpan: 10 * time.Minute, Writers: []string{"Pretrain"}},
		{Path: "/dev/shm", SizeBytes: 1 << 30, AvailBytes: 1 << 30},
	}
	if s.Swap.Ratio != 0.5 || len(s.Disks) != len(want) {
		t.Fatalf("sample %+v, want the host's swap and %d disks", s, len(want))
	}
	for i, w := range want {
		g := s.Disks[i]
		if g.Path != w.Path || g.SizeBytes != w.SizeBytes || g.AvailBytes != w.AvailBytes || g.Files != w.Files || g.FilesFree != w.FilesFree ||
			g.SaveBytes != w.SaveBytes || g.SaveReported != w.SaveReported || g.Saving != w.Saving || g.FillRate != w.FillRate ||
			g.RateSpan != w.RateSpan || !slices.Equal(g.Writers, w.Writers) {
			t.Errorf("disk %d = %+v, want %+v", i, g, w)
		}
	}

	failed := errors.New("meminfo unreadable")
	s, err = WithDisks(func(context.Context) (Sample, error) { return Sample{}, failed }, func() diskguard.Snapshot { return snap })(t.Context())
	if !errors.Is(err, failed) || len(s.Disks) != 0 {
		t.Errorf("failed read: %+v, %v", s, err)
	}
}

// TestAFullDiskIsPushedOnceWhenANewPhaseWritesToIt: the guard's readings
// through the disk rule: a full filesystem that one phase writes to is
// pushed once, and not again when a newer phase starts writing to it
// through another directory, nor when the first phase ends; its resolution
// comes under the name it was pushed under.
func TestAFullDiskIsPushedOnceWhenANewPhaseWritesToIt(t *testing.T) {
	var mu sync.Mutex
	sft := diskguard.Writer{Name: "sft", Dirs: []string{"/data/sft"}, Started: t0}
	ws := []diskguard.Writer{sft}
	setWriters := func(w ...diskguard.Writer) { mu.Lock(); defer mu.Unlock(); ws = w }
	var avail uint64 = 1 * gi
	g, err := diskguard.New(diskguard.Config{
		Paths:   []string{"/"},
		Writers: func() []diskguard.Writer { mu.Lock(); defer mu.Unlock(); return slices.Clone(ws) },
		Stat: func(p string) (diskguard.Stat, error) {
			mu.Lock()
			defer mu.Unlock()
			if p == "/" {
				return diskguard.Stat{Dev: 1, Size: 100 * gi, Free: 50 * gi, Avail: 50 * gi}, nil
			}
			return diskguard.Stat{Dev: 2, Size: 100 * gi, Free: avail, Avail: avail}, nil
		},
		Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newDiskRule(t, "5%")
	now := t0
	var pushed []string
	step := func() {
		now = now.Add(5 * time.Second)
		pushed = append(pushed, kinds(observeDelivered(r, Sample{Disks: DisksOf(g.Poll(t.Context()))}, now))...)
	}

	step()
	eval := diskguard.Writer{Name: "eval", Dirs: []string{"/data/eval"}, Started: t0.Add(time.Hour)}
	setWriters(sft, eval)
	step()
	step()
	sft.Ended = true
	setWriters(sft, eval)
	step()
	mu.Lock()
	avail = 50 * gi
	mu.Unlock()
	step()
	if want := "firing floor /data/sft,resolved floor /data/sft"; strings.Join(pushed, ",") != want {
		t.Errorf("pushed %q, want %q", pushed, want)
	}
	if st := r.State(); !st.Armed {
		t.Errorf("rule %+v after the disk was freed, want armed", st)
	}
}

// TestDefaultMinFree: the parsed default is the constant's 5 %.
func TestDefaultMinFree(t *testing.T) {
	want, err := ParseMinFree(DefaultDiskMinFree)
	if err != nil || DefaultMinFree() != want || want.Ratio != 0.05 {
		t.Errorf("DefaultMinFree() = %+v, ParseMinFree(%q) = %+v, %v", DefaultMinFree(), DefaultDiskMinFree, want, err)
	}
}
