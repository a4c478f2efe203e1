package diskguard

import (
	"path/filepath"
	"slices"
	"time"
)

// A save shows in the readings as a jump of the used bytes: nothing for an
// hour, then gigabytes within a few polls. A jump is a rise between two
// polls of at least minJump; a save is the rise from before its first jump
// to the peak of the jumps that follow, ended by quietPolls polls without
// one, spanning at least quietFor (15 s at the default 5 s interval: a
// save that gathers its optimizer state between two files is still one
// save). Deleting the oldest checkpoint after a save (HF's
// save_total_limit) lowers the used bytes after the peak and so does not
// shrink the save.
const (
	minJumpBytes = 1 << 20 // a log line or two never makes a jump
	minJumpShare = 100_000 // nor a rise under 1/100000 of the filesystem (10 MB of a TB)
	quietPolls   = 3
	quietFor     = time.Second
	ratePoints   = 120 // points kept for the rate: one per window/ratePoints
)

// tracker is what the guard learns of one filesystem.
type tracker struct {
	lastSeen time.Time
	have     bool
	lastUsed uint64
	recent   []uint64 // the last quietPolls+1 readings, newest last

	inBurst   bool
	burstBase uint64 // used bytes before the burst
	burstPeak uint64
	quiet     int       // polls without a jump since the last one
	lastJump  time.Time // when the burst last jumped

	learned  []uint64 // the last savesKept saves seen in the readings
	reported []uint64 // the last savesKept saves writers reported

	points []point // used bytes over the rate window, oldest first
}

type point struct {
	t    time.Time
	used uint64
}

func minJump(size uint64) uint64 { return max(minJumpBytes, size/minJumpShare) }

func keep(list []uint64, v uint64) []uint64 {
	list = append(list, v)
	if len(list) > savesKept {
		list = list[len(list)-savesKept:]
	}
	return list
}

// observe takes one reading. A save is learned only when its first jump
// comes while a running writer has a directory on the filesystem
// (writing): anything else that writes there (a download, a copy, another
// program) is no checkpoint. A save so begun is followed to its end even
// if its writer ends meanwhile (a final save, then the end).
func (t *tracker) observe(st Stat, now time.Time, window time.Duration, writing bool) {
	used := st.Used()
	if t.have {
		switch {
		case used >= t.lastUsed+minJump(st.Size) && (t.inBurst || writing):
			if !t.inBurst {
				// A save that began a poll or two before its first jump
				// (a writer slow to get going) already shows in them, under
				// the jump size: its base is the least of the last few.
				t.inBurst, t.burstBase, t.burstPeak = true, slices.Min(t.recent), used
			}
			t.burstPeak, t.quiet, t.lastJump = max(t.burstPeak, used), 0, now
		case t.inBurst:
			t.burstPeak = max(t.burstPeak, used)
			if t.quiet++; t.quiet >= quietPolls && now.Sub(t.lastJump) >= quietFor {
				t.learned = keep(t.learned, t.burstPeak-t.burstBase)
				t.inBurst = false
			}
		}
	}
	t.recent = append(t.recent, used)
	if len(t.recent) > quietPolls+1 {
		t.recent = t.recent[1:]
	}
	t.have, t.lastUsed, t.lastSeen = true, used, now

	if n := len(t.points); n > 0 && now.Before(t.points[n-1].t) {
		t.points = nil // the clock stepped back: the old points mean nothing
	}
	step := window / ratePoints
	if n := len(t.points); n == 0 || now.Sub(t.points[n-1].t) >= step {
		t.points = append(t.points, point{now, used})
	}
	// Keep one point at or before the window's start as its anchor.
	for len(t.points) >= 2 && !t.points[1].t.After(now.Add(-window)) {
		t.points = t.points[1:]
	}
}

// rate is the growth of the used bytes per second since the oldest point,
// and the time that covers; unknown (0 span) under a third of the window.
func (t *tracker) rate(now time.Time, window time.Duration) (float64, time.Duration) {
	if len(t.points) == 0 {
		return 0, 0
	}
	first := t.points[0]
	span := now.Sub(first.t)
	if span < window/3 || span <= 0 {
		return 0, 0
	}
	return (float64(t.lastUsed) - float64(first.used)) / span.Seconds(), span
}

// saveSize is the size of one save: the largest of the last reported, or
// failing those of the last seen; 0 while neither is known.
func (t *tracker) saveSize() (uint64, bool) {
	if len(t.reported) > 0 {
		return slices.Max(t.reported), true
	}
	if len(t.learned) > 0 {
		return slices.Max(t.learned), false
	}
	return 0, false
}

// learn feeds the poll's readings to the trackers, credits the writers'
// new save reports to the filesystem of their last directory, and fills in
// what is learned.
func (g *Guard) learn(fss []Filesystem, writers []Writer, pathDev map[string]uint64, now time.Time) {
	window := g.cfg.RateWindow
	for _, f := range fss {
		t := g.trackers[f.Stat.Dev]
		if t == nil {
			t = &tracker{}
			g.trackers[f.Stat.Dev] = t
		}
		t.observe(f.Stat, now, window, len(f.Writers) > 0)
	}

	present := map[string]bool{}
	for _, w := range writers {
		present[w.Name] = true
		seen := g.seenSaves[w.Name]
		if !w.SavedAt.After(seen) || w.SaveBytes == 0 || len(w.Dirs) == 0 {
			g.seenSaves[w.Name] = w.SavedAt // nothing new, or a phase that started over
			continue
		}
		dev, ok := pathDev[filepath.Clean(w.Dirs[len(w.Dirs)-1])]
		if !ok {
			continue // not readable now: credited once it is
		}
		g.trackers[dev].reported = keep(g.trackers[dev].reported, w.SaveBytes)
		g.seenSaves[w.Name] = w.SavedAt
	}
	for name := range g.seenSaves {
		if !present[name] {
			delete(g.seenSaves, name)
		}
	}

	for i := range fss {
		t := g.trackers[fss[i].Stat.Dev]
		fss[i].SaveBytes, fss[i].SaveReported = t.saveSize()
		fss[i].Saving = t.inBurst
		fss[i].Rate, fss[i].RateSpan = t.rate(now, window)
	}
	for dev, t := range g.trackers {
		if now.Sub(t.lastSeen) > window {
			delete(g.trackers, dev) // gone for longer than anything it knows stays true
		}
	}
}
