package pushtext

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/watchdog"
)

// maxDiskPathBytes bounds a path in a push: the phone shows a line or two,
// and the end of a path is the part that tells checkpoints from data.
const maxDiskPathBytes = 60

// DiskSpace is the text of a disk-space alert, by its condition:
//
//	disk /data: 16 MB free, a checkpoint save takes 24 MB — the next save will fail
//	disk /data: 120 GB free, fills in ~40m; "Pretrain 1/3" needs ~2h10m more
//	disk /data: 9.8 GB free (4% of 250 GB), under the 5% floor
//	disk /data: 2% of inodes free (1.3k of 65k) — new files will fail
//	disk /mnt/nfs: statfs has not answered for 1m — a save there will hang
//	disk /data: unreadable for 1m (statfs /data: permission denied) — a save there may fail
//
// A resolution says what is free now: "resolved: disk /data: 40 MB free
// after 3m", or for an unreadable path "resolved: disk /mnt/nfs: answers
// again after 5m". Subjects name the condition and the filesystem: "disk
// save /data".
func DiskSpace(a watchdog.Alert) Text {
	d := a.Disk
	head := "disk " + diskPath(d.Path) + ": "
	free := HumanBytes(d.AvailBytes) + " free"
	subject := "disk " + string(a.DiskKind) + " " + diskPath(d.Path) // the kind first: a long path is what the run log cuts
	inodes := fmt.Sprintf("%s of inodes free", percentOf(d.FilesFree, d.Files))
	if a.DiskKind == watchdog.DiskUnreadable {
		return diskUnreadable(a, head, subject)
	}
	if a.Status == watchdog.Resolved {
		if a.DiskKind == watchdog.DiskInodes {
			return Text{Body: head + inodes, Subject: subject}
		}
		return Text{Body: head + free, Subject: subject}
	}
	switch a.DiskKind {
	case watchdog.DiskSave:
		return Text{Body: head + free + ", a checkpoint save takes " + HumanBytes(d.SaveBytes) + " — the next save will fail", Subject: subject}
	case watchdog.DiskFill:
		fills, _ := d.FillsIn()
		return Text{Body: head + free + ", fills in ~" + HumanDuration(fills) + "; " + strconv.Quote(phaseName(a.Phase)) +
			" needs ~" + HumanDuration(a.ETA) + " more", Subject: subject}
	case watchdog.DiskFloor:
		return Text{Body: head + free + " (" + percentOf(d.AvailBytes, d.SizeBytes) + " of " + HumanBytes(d.SizeBytes) + "), under the " + MinFree(a.MinFree) + " floor", Subject: subject}
	case watchdog.DiskInodes:
		return Text{Body: head + inodes + " (" + count(d.FilesFree) + " of " + count(d.Files) + ") — new files will fail", Subject: subject}
	}
	return Text{Body: head + free, Subject: subject}
}

// maxDiskErrBytes bounds the error an unreadable path's push quotes.
const maxDiskErrBytes = 80

// diskUnreadable is the text of a watched path statfs cannot read.
func diskUnreadable(a watchdog.Alert, head, subject string) Text {
	d := a.Disk
	if a.Status == watchdog.Resolved {
		return Text{Body: head + "answers again", Subject: subject}
	}
	lasted := HumanDuration(max(a.At.Sub(d.ErrSince), 0))
	if d.Hung {
		return Text{Body: head + "statfs has not answered for " + lasted + " — a save there will hang", Subject: subject}
	}
	return unreadableFor(head, lasted, d.Err, subject)
}

// unreadableFor is "<head>unreadable for <lasted> (<why>) — a save there
// may fail", the one wording of a path statfs fails, whether the watchdog
// knows since when or an Alertmanager alert knows only a lower bound.
func unreadableFor(head, lasted, why, subject string) Text {
	why = textsafe.Truncate(oneLine(why), maxDiskErrBytes)
	return Text{Body: head + "unreadable for " + lasted + " (" + why + ") — a save there may fail", Subject: subject}
}

// DiskUnreadableOver is the text of a path known to have been unreadable
// for more than over, though not since when, as an Alertmanager alert's: it
// starts once its rule's `for` has passed, and reaches the bridge after
// Alertmanager's group_wait. "disk /mnt/nfs: unreadable for over 1m30s
// (statfs failed or did not answer) — a save there may fail", subject "disk
// unreadable /mnt/nfs".
func DiskUnreadableOver(path, why string, over time.Duration) Text {
	return unreadableFor("disk "+diskPath(path)+": ", "over "+HumanDuration(max(over, 0)), why,
		"disk "+string(watchdog.DiskUnreadable)+" "+diskPath(path))
}

// diskPath keeps a path on one line and within maxDiskPathBytes, cut at
// its start: "…/run-7/checkpoints".
func diskPath(p string) string {
	p = oneLine(p)
	if len(p) <= maxDiskPathBytes {
		return p
	}
	cut := len(p) - (maxDiskPathBytes - len("…"))
	for cut < len(p) && !isRuneStart(p[cut]) {
		cut++
	}
	return "…" + p[cut:]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// percentOf is n of total as a whole percentage, cut rather than rounded
// so that 4.9% never reads as the 5% floor: "4%". Under 1% it is "<1%".
func percentOf(n, total uint64) string {
	if total == 0 {
		return "?%"
	}
	p := float64(n) / float64(total) * 100
	if p > 0 && p < 1 {
		return "<1%"
	}
	return strconv.Itoa(int(p)) + "%"
}

// count is an inode count the way a person reads it: "980", "1.3k", "65k",
// "1.2M".
func count(n uint64) string {
	switch {
	case n < 1000:
		return strconv.FormatUint(n, 10)
	case n < 10_000:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e3), ".0") + "k"
	case n < 1_000_000:
		return strconv.FormatUint(n/1000, 10) + "k"
	case n < 10_000_000:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e6), ".0") + "M"
	}
	return strconv.FormatUint(n/1_000_000, 10) + "M"
}
