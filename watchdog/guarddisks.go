package watchdog

import (
	"context"

	"github.com/lavender-ml/lavender/diskguard"
)

// DisksOf is the watchdog's view of the disk guard's readings: each
// filesystem read, with its save size, fill rate and writers.
func DisksOf(snap diskguard.Snapshot) []Disk {
	var out []Disk
	for _, f := range snap.Filesystems {
		out = append(out, DiskOf(f))
	}
	return out
}

// DiskOf is one filesystem the guard read, as the disk rules see it.
func DiskOf(f diskguard.Filesystem) Disk {
	return Disk{
		Path: f.Path, Paths: f.Paths, SizeBytes: f.Stat.Size, AvailBytes: f.Stat.Avail, Files: f.Stat.Files, FilesFree: f.Stat.FilesFree,
		SaveBytes: f.SaveBytes, SaveReported: f.SaveReported, Saving: f.Saving, FillRate: f.Rate, RateSpan: f.RateSpan, Writers: f.Writers,
	}
}

// UnreadableOf is the watched paths the guard could not read, each as a
// Disk that says why and since when.
func UnreadableOf(snap diskguard.Snapshot) []Disk {
	var out []Disk
	for _, u := range snap.Unreadable {
		out = append(out, Disk{Path: u.Path, Err: u.Err, ErrSince: u.Since, Hung: u.Hung})
	}
	return out
}

// WithDisks adds the guard's last readings, from latest, to each sample of
// read. It never waits on a filesystem: the guard reads them apart, so a
// hung statfs delays no rule.
func WithDisks(read Reader, latest func() diskguard.Snapshot) Reader {
	return func(ctx context.Context) (Sample, error) {
		s, err := read(ctx)
		if err != nil {
			return s, err
		}
		snap := latest()
		s.Disks = append(s.Disks, DisksOf(snap)...)
		s.UnreadableDisks = append(s.UnreadableDisks, UnreadableOf(snap)...)
		return s, nil
	}
}

// DefaultMinFree is DefaultDiskMinFree, parsed: the floor a status page
// marks disks at where no disk rule sets one.
func DefaultMinFree() MinFree {
	floor, err := ParseMinFree(DefaultDiskMinFree)
	if err != nil {
		panic(err) // a constant
	}
	return floor
}
