package watchdog

import (
	"context"
	"errors"
	"slices"
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

// TestDefaultMinFree: the parsed default is the constant's 5 %.
func TestDefaultMinFree(t *testing.T) {
	want, err := ParseMinFree(DefaultDiskMinFree)
	if err != nil || DefaultMinFree() != want || want.Ratio != 0.05 {
		t.Errorf("DefaultMinFree() = %+v, ParseMinFree(%q) = %+v, %v", DefaultMinFree(), DefaultDiskMinFree, want, err)
	}
}
