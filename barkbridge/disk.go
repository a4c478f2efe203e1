package barkbridge

import (
	"strings"
	"time"

	"github.com/prometheus/alertmanager/template"

	"lavender/pushtext"
	"lavender/watchdog"
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
	// maxPathLabel bounds a path label the bridge words; the exporter's are
	// absolute paths of a few dozen bytes.
	maxPathLabel = 4096
)

// diskText is the text of the four disk alerts, the watchdog's words; ok
// is false for another alert, a path the exporter would not have written,
// or figures that are missing or make no sense (the summary is pushed
// then). now is when the push goes out: an unreadable path says how long
// it has been so since the alert's start.
func diskText(name string, a template.Alert, now time.Time) (pushtext.Text, bool) {
	path := a.Labels[labelPath]
	if !strings.HasPrefix(path, "/") || len(path) > maxPathLabel {
		return pushtext.Text{}, false
	}
	an := a.Annotations
	alert := watchdog.Alert{Rule: watchdog.DiskSpaceRule, Status: watchdog.Firing, At: now, Disk: watchdog.Disk{Path: path}}
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
		avail, aok := parseBytes(an[annotationAvailBytes])
		size, sok := parseBytes(an[annotationSizeBytes])
		if !aok || !sok || size == 0 || avail > size {
			return pushtext.Text{}, false
		}
		d.AvailBytes, d.SizeBytes, alert.DiskKind = avail, size, watchdog.DiskFloor
		alert.MinFree = watchdog.MinFree{Ratio: alertsDiskFloor}
	case DiskInodesAlertname:
		free, fok := parseBytes(an[annotationFilesFree])
		files, ok := parseBytes(an[annotationFiles])
		if !fok || !ok || files == 0 || free > files {
			return pushtext.Text{}, false
		}
		d.FilesFree, d.Files, alert.DiskKind = free, files, watchdog.DiskInodes
	case DiskUnreadableAlertname:
		if a.StartsAt.IsZero() || a.StartsAt.After(now) {
			return pushtext.Text{}, false
		}
		d.Err, d.ErrSince, alert.DiskKind = "statfs failed or did not answer", a.StartsAt, watchdog.DiskUnreadable
	default:
		return pushtext.Text{}, false
	}
	return pushtext.DiskSpace(alert), true
}
