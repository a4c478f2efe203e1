package pushtext

import (
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/watchdog"
)

const mib = 1 << 20

func TestDiskTexts(t *testing.T) {
	began := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	data := watchdog.Disk{Path: "/data", SizeBytes: 64 * mib, AvailBytes: 16 * mib, SaveBytes: 24 * mib, Files: 65536, FilesFree: 1300}
	filling := watchdog.Disk{Path: "/data", SizeBytes: 1 << 40, AvailBytes: 120 << 30, FillRate: float64(120<<30) / (40 * 60), RateSpan: 30 * time.Minute}
	big := watchdog.Disk{Path: "/data", SizeBytes: 250 << 30, AvailBytes: 98 << 27} // 12.25 GB: 4.9%
	long := watchdog.Disk{Path: "/mnt/" + strings.Repeat("x", 80) + "/run-7/checkpoints", SizeBytes: 64 * mib, AvailBytes: 16 * mib, SaveBytes: 24 * mib}
	for _, tt := range []struct {
		name string
		a    watchdog.Alert
		want string
		subj string
	}{
		{"save", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing, Disk: data, DiskKind: watchdog.DiskSave},
			"[lavender-2] disk /data: 16 MB free, a checkpoint save takes 24 MB — the next save will fail", "disk save /data"},
		{"fill", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing, Disk: filling, DiskKind: watchdog.DiskFill, Phase: "Pretrain 1/3", ETA: 2*time.Hour + 10*time.Minute},
			`[lavender-2] disk /data: 120 GB free, fills in ~40m; "Pretrain 1/3" needs ~2h10m more`, "disk fill /data"},
		{"floor as a share", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing, Disk: big, DiskKind: watchdog.DiskFloor, MinFree: watchdog.MinFree{Ratio: 0.05}},
			"[lavender-2] disk /data: 12 GB free (4% of 250 GB), under the 5% floor", "disk floor /data"},
		{"floor as a size", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing, Disk: big, DiskKind: watchdog.DiskFloor, MinFree: watchdog.MinFree{Bytes: 20 << 30}},
			"[lavender-2] disk /data: 12 GB free (4% of 250 GB), under the 20 GB floor", "disk floor /data"},
		{"inodes", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing, Disk: data, DiskKind: watchdog.DiskInodes},
			"[lavender-2] disk /data: 1% of inodes free (1.3k of 65k) — new files will fail", "disk inodes /data"},
		{"resolved", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Resolved, Disk: data, DiskKind: watchdog.DiskSave, Began: began, At: began.Add(3 * time.Minute)},
			"[lavender-2] resolved: disk /data: 16 MB free after 3m", "resolved disk save /data"},
		{"resolved inodes", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Resolved, Disk: data, DiskKind: watchdog.DiskInodes, Began: began, At: began.Add(time.Hour)},
			"[lavender-2] resolved: disk /data: 1% of inodes free after 1h", "resolved disk inodes /data"},
		{"hung", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing, At: began.Add(70 * time.Second), DiskKind: watchdog.DiskUnreadable,
			Disk: watchdog.Disk{Path: "/mnt/nfs", Hung: true, ErrSince: began, Err: "statfs did not answer within 2s"}},
			"[lavender-2] disk /mnt/nfs: statfs has not answered for 1m — a save there will hang", "disk unreadable /mnt/nfs"},
		{"unreadable", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing, At: began.Add(2 * time.Minute), DiskKind: watchdog.DiskUnreadable,
			Disk: watchdog.Disk{Path: "/data", ErrSince: began, Err: "statfs /data:\npermission denied\u202e" + strings.Repeat(" x", 60)}},
			"[lavender-2] disk /data: unreadable for 2m (statfs /data: permission denied" + strings.Repeat(" x", 23) + "…) — a save there may fail", "disk unreadable /data"},
		{"readable again", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Resolved, Began: began, At: began.Add(5 * time.Minute), DiskKind: watchdog.DiskUnreadable,
			Disk: watchdog.Disk{Path: "/mnt/nfs"}},
			"[lavender-2] resolved: disk /mnt/nfs: answers again after 5m", "resolved disk unreadable /mnt/nfs"},
		{"path with a line break", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing, DiskKind: watchdog.DiskSave,
			Disk: watchdog.Disk{Path: "/data\n[lavender-2] all good\u202e", AvailBytes: 16 * mib, SaveBytes: 24 * mib}},
			"[lavender-2] disk /data [lavender-2] all good: 16 MB free, a checkpoint save takes 24 MB — the next save will fail", "disk save /data [lavender-2] all good"},
		{"long path", watchdog.Alert{Rule: watchdog.RuleDiskSpace, Status: watchdog.Firing, Disk: long, DiskKind: watchdog.DiskSave},
			"[lavender-2] disk …" + strings.Repeat("x", 39) + "/run-7/checkpoints: 16 MB free, a checkpoint save takes 24 MB — the next save will fail", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := Alert(tt.a)
			if got := WithPrefix(DefaultPrefix, text.Body); got != tt.want {
				t.Errorf("body\n got %q\nwant %q", got, tt.want)
			}
			if tt.subj != "" && text.Subject != tt.subj {
				t.Errorf("subject %q, want %q", text.Subject, tt.subj)
			}
		})
	}
}

// TestFloorPushSaysTheFloorAsTheFlagGaveIt: the floor push, from the
// flag's value through the disk rule, names the floor in the number and
// unit the user wrote, never in HumanBytes's binary units (a decimal 10GB
// would read "9.3 GB") nor a share's float round trip.
func TestFloorPushSaysTheFloorAsTheFlagGaveIt(t *testing.T) {
	for _, tt := range []struct {
		flag  string
		avail uint64 // just under the floor on a 4 TiB filesystem
		want  string
	}{
		{"10GB", 9_800_000_000, "under the 10 GB floor"},
		{"512MiB", 500 << 20, "under the 512 MiB floor"},
		{"1.5TB", 1_400_000_000_000, "under the 1.5 TB floor"},
		{"2G", 1 << 30, "under the 2G floor"},
		{"100kB", 90_000, "under the 100 kB floor"},
		{"5%", 200 << 30, "under the 5% floor"},
		{"7%", 250 << 30, "under the 7% floor"},
		{"0.5%", 20 << 30, "under the 0.5% floor"},
	} {
		t.Run(tt.flag, func(t *testing.T) {
			floor, err := watchdog.ParseMinFree(tt.flag)
			if err != nil {
				t.Fatal(err)
			}
			r, err := watchdog.NewDiskRule(watchdog.DiskConfig{MinFree: floor})
			if err != nil {
				t.Fatal(err)
			}
			d := watchdog.Disk{Path: "/data", SizeBytes: 4 << 40, AvailBytes: tt.avail}
			var floors []watchdog.Alert
			for _, a := range r.Observe(watchdog.Sample{Disks: []watchdog.Disk{d}}, time.Time{}) {
				if a.DiskKind == watchdog.DiskFloor {
					floors = append(floors, a)
				}
			}
			if len(floors) != 1 {
				t.Fatalf("%d floor alerts, want 1", len(floors))
			}
			if body := Alert(floors[0]).Body; !strings.HasSuffix(body, ", "+tt.want) {
				t.Errorf("push %q, want it to end %q", body, tt.want)
			}
		})
	}
}

func TestInodeCount(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1k", 1300: "1.3k", 65536: "65k", 1_200_000: "1.2M", 33_000_000: "33M"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestDiskUnreadableOver: a path known to have been unreadable for more
// than a while says so as a lower bound, its error on one line and cut.
func TestDiskUnreadableOver(t *testing.T) {
	for _, tt := range []struct {
		path, why string
		over      time.Duration
		want      string
	}{
		{"/mnt/nfs", "statfs failed or did not answer", 90 * time.Second, "disk /mnt/nfs: unreadable for over 1m (statfs failed or did not answer) — a save there may fail"},
		{"/mnt/nfs", "statfs failed or did not answer", 45 * time.Second, "disk /mnt/nfs: unreadable for over 45s (statfs failed or did not answer) — a save there may fail"},
		{"/mnt/nfs", "a\nb", -time.Second, "disk /mnt/nfs: unreadable for over 0s (a b) — a save there may fail"},
	} {
		got := DiskUnreadableOver(tt.path, tt.why, tt.over)
		if got.Body != tt.want || got.Subject != "disk unreadable /mnt/nfs" {
			t.Errorf("DiskUnreadableOver(%q, %q, %s) = %q / %q, want %q", tt.path, tt.why, tt.over, got.Body, got.Subject, tt.want)
		}
	}
}
