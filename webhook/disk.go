package webhook

import (
	"strings"
	"time"

	"github.com/prometheus/alertmanager/template"

	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/watchdog"
)

// The Prometheus alerts on the disk guard's readings (alerts.yml), which
// the bridge words as serve's disk pushes: the path label names the
// filesystem, plain-number annotations carry its figures.
const (
	DiskSaveAlertname       = "DiskSaveWillNotFit"
	DiskSpaceAlertname      = "DiskSpaceLow"
	DiskInodesAlertname     = "DiskInodesLow"
	DiskUnreadableAlertname = "DiskUnreadable"

	labelPath = "path"

	annotationAvailBytes = "avail_bytes"
	annotationSizeBytes  = "size_bytes"
	annotationSaveBytes  = "save_bytes"
	annotationFilesFree  = "files_free"
	annotationFiles      = "files"

	// alertsDiskFloor is the floor DiskSpaceLow fires under.
	alertsDiskFloor = 0.05
	// DiskUnreadableFor is DiskUnreadable's `for` in alerts.yml: Prometheus
	// sets an alert's startsAt when it fires, this long after statfs was
	// first seen failing, so an unreadable path has been so for at least
	// this long before startsAt.
	DiskUnreadableFor = time.Minute
	// maxPathLabel bounds a path label the bridge words; the exporter's are
	// absolute paths of a few dozen bytes.
	maxPathLabel = 4096
)

// diskText is the text of the four disk alerts, the watchdog's words; ok
// is false for another alert, a path the exporter would not have written,
// or figures that are missing or make no sense (the summary is pushed
// then). now is when the push goes out: an unreadable path says how long
// it has been so at least, since the alert's start and its rule's `for`
// before it.
func diskText(name string, a template.Alert, now time.Time) (pushtext.Text, bool) {
	path := a.Labels[labelPath]
	if !strings.HasPrefix(path, "/") || len(path) > maxPathLabel {
		return pushtext.Text{}, false
	}
	an := a.Annotations
	alert := watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing, At: now, Disk: watchdog.Disk{Path: path}}
	d := &alert.Disk
	switch name {
	case DiskSaveAlertname:
		avail, aok := parseBytes(an[annotationAvailBytes])
		save, sok := parseBytes(an[annotationSaveBytes])
		if !aok || !sok || save == 0 {
			return pushtext.Text{}, false
		}
		d.AvailBytes, d.SaveBytes, alert.DiskKind = avail, save, watchdog.DiskSave
	case DiskSpaceAlertname:
		avail, size, ok := partOfWhole(an, annotationAvailBytes, annotationSizeBytes)
		if !ok {
			return pushtext.Text{}, false
		}
		d.AvailBytes, d.SizeBytes, alert.DiskKind = avail, size, watchdog.DiskFloor
		alert.MinFree = watchdog.MinFree{Ratio: alertsDiskFloor}
	case DiskInodesAlertname:
		free, files, ok := partOfWhole(an, annotationFilesFree, annotationFiles)
		if !ok {
			return pushtext.Text{}, false
		}
		d.FilesFree, d.Files, alert.DiskKind = free, files, watchdog.DiskInodes
	case DiskUnreadableAlertname:
		if a.StartsAt.IsZero() || a.StartsAt.After(now) {
			return pushtext.Text{}, false
		}
		// When statfs began failing is not known, only that it was at
		// least DiskUnreadableFor before the alert fired.
		return pushtext.DiskUnreadableOver(path, "statfs failed or did not answer", now.Sub(a.StartsAt)+DiskUnreadableFor), true
	default:
		return pushtext.Text{}, false
	}
	return pushtext.DiskSpace(alert), true
}

// partOfWhole reads the free part of a filesystem's bytes or inodes and
// their total from two annotations; ok is false unless both are counts
// and the part fits in a total above zero.
func partOfWhole(an template.KV, partKey, wholeKey string) (part, whole uint64, ok bool) {
	part, pok := parseBytes(an[partKey])
	whole, wok := parseBytes(an[wholeKey])
	return part, whole, pok && wok && whole > 0 && part <= whole
}
