package diskguard

import (
	"path/filepath"
	"slices"
	"time"
)

// A save shows in the readings as a jump of the used bytes: little for an
// hour, then gigabytes within a few polls. A jump is a rise between two
// polls of at least minJump over twice what the filesystem's background
// writers (logs, a data-prep job, a download) add in the same time; a save
// is the rise from before its first jump to the peak of the jumps that
// follow, less what the background wrote meanwhile, ended by quietPolls
// polls without one, spanning at least quietFor (15 s at the default 5 s
// interval: a save that gathers its optimizer state between two files is
// still one save). Deleting the oldest checkpoint after a save (HF's
// save_total_limit) lowers the used bytes after the peak and so does not
// shrink the save.
//
// The background is the median rise a second of the last bgPolls polls
// outside a save. A writer that starts during a save (or with its last
// file) is no background yet, so a rise within a save that falls under
// 1/fallRatio of the save's fastest is no jump either: the save is over
// once the rises have fallen back for quietPolls polls, and those polls
// are the background from then on. A burst that never falls back (a
// download, a copy that starts while a phase trains) ends after maxBurst,
// longer than any save takes, and teaches nothing: its rate becomes the
// background.
const (
	minJumpBytes = 1 << 20 // a log line or two never makes a jump
	minJumpShare = 100_000 // nor a rise under 1/100000 of the filesystem (10 MB of a TB)
	quietPolls   = 3
	quietFor     = time.Second
	ratePoints   = 120 // points kept for the rate: one per window/ratePoints

	// bgPolls is a minute at the default interval: the median over it
	// passes over a lone burst of a background writer.
	bgPolls = 12
	// bgSlack: a background writer's rise wobbles from poll to poll (it
	// flushes in chunks); twice its median leaves room for that, while a
	// save's rises (hundreds of MB to GB a poll) stay far above.
	bgSlack = 2
	// fallRatio: a save's write speed varies by a few times (page cache,
	// then the disk's own speed), not by twenty while it still writes.
	fallRatio = 20
	// maxBurst: a 70B model's full checkpoint (weights and Adam state,
	// about a terabyte) written at 1 GB/s takes 17 minutes.
	maxBurst = 30 * time.Minute
)

// tracker is what the guard learns of one filesystem.
type tracker struct {
	lastSeen time.Time
	have     bool
	lastUsed uint64
	recent   []point // the last quietPolls+1 readings, newest last

	// bg is the rises a second (negative ones as 0) of the last bgPolls
	// polls outside a burst, oldest first: the background writers.
	bg []float64

	inBurst    bool
	burstStart time.Time
	burstBase  point   // the reading before the burst
	burstTop   uint64  // the highest reading of its jumps
	burstBg    float64 // the background, bytes a second, when it began
	fastest    float64 // its fastest rise, bytes a second
	quiet      int     // polls without a jump since the last one
	lastJump   time.Time
	tail       []float64 // the rises a second of its last bgPolls polls

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

// last appends v to list, keeping the newest n.
func last(list []float64, v float64, n int) []float64 {
	list = append(list, v)
	if len(list) > n {
		list = list[len(list)-n:]
	}
	return list
}

// background is the filesystem's background writes, bytes a second. One
// that rises less than a jump a poll (logs) counts as none: the jump size
// already passes over it, and what it adds to a save is within the save's
// margin; counting it would take a slow save's first bytes for background.
func (t *tracker) background(dt time.Duration, jump uint64) float64 {
	if len(t.bg) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(t.bg))
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	if m*dt.Seconds() < float64(jump) {
		return 0
	}
	return m
}

// observe takes one reading. A save is learned only when its first jump
// comes while a running writer has a directory on the filesystem
// (writing): anything else that writes there (a download, a copy, another
// program) is no checkpoint. A save so begun is followed to its end even
// if its writer ends meanwhile (a final save, then the end).
func (t *tracker) observe(st Stat, now time.Time, window time.Duration, writing bool) {
	used := st.Used()
	// A clock that stood still or stepped back gives no rise a second to
	// judge by: the reading only starts the next comparison.
	if dt := now.Sub(t.lastSeen); t.have && dt > 0 {
		jump := minJump(st.Size)
		rise := max(0, float64(used)-float64(t.lastUsed)) / dt.Seconds()
		switch {
		case t.inBurst && now.Sub(t.burstStart) >= maxBurst:
			// No save lasts this long: a stream, whose rate is the
			// background from now on.
			t.bg, t.inBurst = last(t.tail, rise, bgPolls), false
		case t.inBurst:
			t.tail = last(t.tail, rise, bgPolls)
			if used >= t.lastUsed+jump+uint64(bgSlack*t.burstBg*dt.Seconds()) && rise*fallRatio > t.fastest {
				t.burstTop, t.fastest, t.quiet, t.lastJump = max(t.burstTop, used), max(t.fastest, rise), 0, now
				break
			}
			if t.quiet++; t.quiet >= quietPolls && now.Sub(t.lastJump) >= quietFor {
				// What the background wrote over the save is no part of it.
				bgBytes := uint64(t.burstBg * t.lastJump.Sub(t.burstBase.t).Seconds())
				if size := t.burstTop - t.burstBase.used; size > bgBytes {
					t.learned = keep(t.learned, size-bgBytes)
				}
				// What writes on after a save is the background now,
				// whatever it was before.
				t.bg, t.inBurst = slices.Clone(t.tail[len(t.tail)-min(t.quiet, len(t.tail)):]), false
			}
		case writing && used >= t.lastUsed+jump+uint64(bgSlack*t.background(dt, jump)*dt.Seconds()):
			// A save that began a poll or two before its first jump
			// (a writer slow to get going) already shows in them, under
			// the jump size: its base is the least of the last few.
			base := t.recent[0]
			for _, p := range t.recent[1:] {
				if p.used <= base.used {
					base = p
				}
			}
			t.inBurst, t.burstStart, t.burstBase, t.burstBg = true, now, base, t.background(dt, jump)
			t.burstTop, t.fastest, t.quiet, t.lastJump, t.tail = used, rise, 0, now, []float64{rise}
		default:
			t.bg = last(t.bg, rise, bgPolls)
		}
	}
	t.recent = append(t.recent, point{now, used})
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
