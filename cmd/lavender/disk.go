package main

import "github.com/lavender-ml/lavender/app"

// diskFlags are the filesystems exporter and serve watch, beside the
// directories phases report.
type diskFlags struct {
	WatchdogDisk []string `name:"watchdog.disk" sep:"none" placeholder:"PATH" help:"A filesystem to watch (repeatable): free space and inodes as metrics, and in serve the disk pushes. Phases' directories are watched too, and --watchdog.shm. A path that does not exist yet is watched once it appears."`
	WatchdogShm  string   `name:"watchdog.shm" default:"${watchdog_shm}" help:"Shared memory to watch as a disk (a full one crashes DataLoader workers with a bus error); empty: not watched."`
}

// diskRuleFlags are serve's disk rule.
type diskRuleFlags struct {
	WatchdogDiskMinFree string `name:"watchdog.disk-min-free" default:"${watchdog_disk_min_free}" help:"Push when a watched filesystem has less free than this: a size (10GB, 512MiB) or a share of it (5%); 0 turns the floor off. Pushes also come when the next checkpoint save will not fit, when the disk fills before the running phase's ETA, and when under 5% of inodes are free."`
}

// paths are the fixed paths to watch, made absolute, in order.
func (f *diskFlags) paths() ([]string, error) {
	return app.DiskPaths(f.WatchdogDisk, f.WatchdogShm)
}
