package statuspage

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/diskguard"
	"github.com/lavender-ml/lavender/watchdog"
)

const mib = 1 << 20

func diskSnapshot() diskguard.Snapshot {
	return diskguard.Snapshot{
		At: t0,
		Filesystems: []diskguard.Filesystem{
			{Path: "/data", Paths: []string{"/data", "/data/ckpt"}, Writers: []string{"Pretrain 1/3"}, SaveBytes: 24 * mib,
				Stat: diskguard.Stat{Dev: 1, Size: 64 * mib, Free: 16 * mib, Avail: 16 * mib, Files: 16384, FilesFree: 16000}},
			{Path: "/dev/shm", Stat: diskguard.Stat{Dev: 2, Size: 64 * mib, Free: 60 * mib, Avail: 60 * mib, Files: 100, FilesFree: 90},
				Rate: float64(60*mib) / 2400, RateSpan: 30 * time.Minute},
			{Path: `/runs/<img src=x onerror=alert(1)>`, Stat: diskguard.Stat{Dev: 3, Size: 64 * mib, Free: 64 * mib, Avail: 64 * mib}},
		},
		Unreadable: []diskguard.Unreadable{{Path: "/mnt/nfs", Err: "statfs did not answer within 2s", Since: t0.Add(-time.Minute)}},
		Missing:    []string{"/scratch/run-7"},
		NotWatched: []diskguard.NotWatched{{Path: "/scratch/old-7", Writers: []string{"Eval"}, Reason: "phases write to more than 32 filesystems; the newest running phases' are watched first"}},
	}
}

// TestPageDisks: each watched filesystem has a bar (a meter, which needs
// no inline style under the page's CSP), its free space and inodes, the
// save size, the fill time; a disk short of the next save is marked; an
// unreadable path and a missing one say so, and a phase's directory the
// guard leaves out says why; a path is text, never markup.
func TestPageDisks(t *testing.T) {
	r := newRig(t, func(c *Config) {
		c.Disks = diskSnapshot
		c.DiskMinFree = watchdog.MinFree{Ratio: 0.05}
	})
	page := r.html()
	section := page[strings.Index(page, `<section id="disks"`):]
	section = section[:strings.Index(section, "</section>")]
	for _, want := range []string{
		// The bar shows the free share, as its text does, and warns under 5 %.
		`<meter min="0" max="67108864" value="16777216" low="3355443" optimum="67108864">25% free</meter>`,
		"16 MiB free of 64 MiB", "inodes 98% free", "a save takes 24 MiB", "also /data, /data/ckpt", "Pretrain 1/3",
		`<strong class="high">the next save will not fit</strong>`, `<tr class="disk ok short">`,
		"60 MiB free of 64 MiB", "fills in ~40m at the last 30m's rate",
		"&lt;img src=x onerror=alert(1)&gt;",
		"unreadable: statfs did not answer within 2s", "/scratch/run-7", "does not exist yet; watched once it appears",
		`<tr class="disk unwatched">`, "/scratch/old-7", "not watched: phases write to more than 32 filesystems; the newest running phases&#39; are watched first",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("disk section lacks %q:\n%s", want, section)
		}
	}
	if strings.Contains(section, "<img") || strings.Contains(section, "style=") {
		t.Errorf("markup or inline style in the disk section:\n%s", section)
	}
	if n := strings.Count(section, "<meter"); n != 3 {
		t.Errorf("%d bars, want one per readable filesystem (3)", n)
	}

	_, _, body := r.get(StatusPath)
	var s struct {
		Disks []Disk `json:"disks"`
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Disks) != 6 || s.Disks[5].State != "unwatched" || s.Disks[5].Reason == "" || len(s.Disks[5].Phases) != 1 || s.Disks[0].State != "ok" || len(s.Disks[0].Short) != 1 || s.Disks[0].Short[0] != watchdog.DiskSave ||
		s.Disks[1].FillsInSeconds == nil || *s.Disks[1].FillsInSeconds != 2400 || s.Disks[3].State != "unreadable" || s.Disks[4].State != "missing" {
		t.Errorf("JSON disks: %s", body)
	}
}

// TestPageWithoutDiskGuard: no guard, no section and no disks in the JSON.
func TestPageWithoutDiskGuard(t *testing.T) {
	r := newRig(t)
	if strings.Contains(r.html(), `id="disks"`) {
		t.Error("a disk section without a guard")
	}
	if _, _, body := r.get(StatusPath); strings.Contains(body, `"disks"`) {
		t.Errorf("JSON: %s", body)
	}
}

// TestDiskNamedByAnEndedPhaseShowsItsPaths: a filesystem keeps the name
// a phase's directory gave it after that phase ends, so its row lists the
// path that leads to it now even when that is the only one; a filesystem
// reached by its name alone lists none.
func TestDiskNamedByAnEndedPhaseShowsItsPaths(t *testing.T) {
	st := diskguard.Stat{Dev: 2, Size: 64 * mib, Free: 32 * mib, Avail: 32 * mib}
	disks := newDisks(diskguard.Snapshot{Filesystems: []diskguard.Filesystem{
		{Path: "/data/sft", Paths: []string{"/data/eval"}, Writers: []string{"eval"}, Stat: st},
		{Path: "/scratch", Paths: []string{"/scratch"}, Stat: st},
	}}, watchdog.MinFree{})
	if len(disks) != 2 || strings.Join(disks[0].Paths, ",") != "/data/eval" || disks[1].Paths != nil {
		t.Errorf("rows %+v, want /data/sft listing /data/eval, /scratch listing nothing", disks)
	}
}
