package diskguard

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics' path label is a filesystem's name (Filesystem.Path: one
// series per filesystem, however many paths lead to it, under the name it
// kept since it was first read), or an unreadable path. Its values are
// bounded by the fixed paths plus MaxWriterFilesystems.
var (
	diskLabels    = []string{"path"}
	availDesc     = prometheus.NewDesc("lavender_disk_avail_bytes", "Bytes an unprivileged writer may still use on the filesystem (statfs f_bavail × f_frsize).", diskLabels, nil)
	sizeDesc      = prometheus.NewDesc("lavender_disk_size_bytes", "Size of the filesystem in bytes (statfs f_blocks × f_frsize).", diskLabels, nil)
	filesFreeDesc = prometheus.NewDesc("lavender_disk_files_free", "Free inodes of the filesystem (statfs f_ffree).", diskLabels, nil)
	filesDesc     = prometheus.NewDesc("lavender_disk_files", "Inodes of the filesystem (statfs f_files); 0 where the filesystem has no fixed number.", diskLabels, nil)
	errorDesc     = prometheus.NewDesc("lavender_disk_error", "1 if statfs of the watched path failed or did not answer in time (a hung network filesystem), 0 for a filesystem read.", diskLabels, nil)
	unwatchedHelp = "Running phases' directories the disk guard does not watch: they lead to filesystems beyond the " + strconv.Itoa(MaxWriterFilesystems) + " it takes from phases (the newest running phases' come first). The status page lists them."
	unwatchedDesc = prometheus.NewDesc("lavender_disk_unwatched_paths", unwatchedHelp, nil, nil)
	saveDesc      = prometheus.NewDesc("lavender_disk_save_bytes", "Size of one checkpoint save onto the filesystem, as reported by clients or learned from the jumps of its used bytes; absent while unknown.", diskLabels, nil)
	savingDesc    = prometheus.NewDesc("lavender_disk_saving", "1 while a save (or a copy) is being written onto the filesystem (its used bytes jump), so what is free is not yet what the save leaves; 0 otherwise.", diskLabels, nil)
)

// Collector publishes the last poll's readings; it reads no filesystem at
// scrape time, so a hung one never hangs a scrape.
func (g *Guard) Collector() prometheus.Collector { return (*collector)(g) }

type collector Guard

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{availDesc, sizeDesc, filesFreeDesc, filesDesc, errorDesc, saveDesc, savingDesc, unwatchedDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap := (*Guard)(c).Latest()
	gauge := func(d *prometheus.Desc, v uint64, path string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), path)
	}
	for _, f := range snap.Filesystems {
		gauge(availDesc, f.Stat.Avail, f.Path)
		gauge(sizeDesc, f.Stat.Size, f.Path)
		gauge(filesFreeDesc, f.Stat.FilesFree, f.Path)
		gauge(filesDesc, f.Stat.Files, f.Path)
		gauge(errorDesc, 0, f.Path)
		saving := uint64(0)
		if f.Saving {
			saving = 1
		}
		gauge(savingDesc, saving, f.Path)
		if f.SaveBytes > 0 {
			gauge(saveDesc, f.SaveBytes, f.Path)
		}
	}
	for _, u := range snap.Unreadable {
		gauge(errorDesc, 1, u.Path)
	}
	ch <- prometheus.MustNewConstMetric(unwatchedDesc, prometheus.GaugeValue, float64(len(snap.NotWatched)))
}
