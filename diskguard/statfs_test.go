package diskguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestStatfsOfARealTmpfs reads a 64 MiB tmpfs of 100 inodes: its size, its
// free space, and its inodes as statfs gives them.
func TestStatfsOfARealTmpfs(t *testing.T) {
	dir := testkit.MountTmpfs(t, "size=64m,nr_inodes=100")
	st, err := Statfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != 64*mib || st.Avail != 64*mib || st.Files != 100 || st.FilesFree != 99 {
		t.Errorf("empty tmpfs: %+v, want 64 MiB free, 99 of 100 inodes free", st)
	}
	if err := testkit.WriteFileOfSize(filepath.Join(dir, "a"), 24*mib); err != nil {
		t.Fatal(err)
	}
	if st, err = Statfs(dir); err != nil || st.Avail != 40*mib || st.FilesFree != 98 {
		t.Errorf("after 24 MiB: %+v, %v", st, err)
	}
	root, err := Statfs("/")
	if err != nil {
		t.Fatal(err)
	}
	if root.Dev == st.Dev {
		t.Errorf("the tmpfs and / share the device id %d", st.Dev)
	}
}

// TestSymlinkIsFollowedAndNamedAsGiven: a symlink into a filesystem is the
// filesystem it leads to, reported by the path given; given with its
// target, the filesystem is watched once, under the first path given.
func TestSymlinkIsFollowedAndNamedAsGiven(t *testing.T) {
	dir := testkit.MountTmpfs(t, "size=8m")
	link := filepath.Join(t.TempDir(), "ckpt")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Paths: []string{link, dir}})
	if err != nil {
		t.Fatal(err)
	}
	s := g.Poll(t.Context())
	if len(s.Filesystems) != 1 || s.Filesystems[0].Path != link || s.Filesystems[0].Stat.Size != 8*mib {
		t.Fatalf("filesystems %+v, want one of 8 MiB named %s", s.Filesystems, link)
	}
	if _, err := Statfs(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing path: %v, want a not-exist error", err)
	}
}

// TestTwoSavesOnARealTmpfs: on a 64 MiB tmpfs the guard learns a 24 MiB
// save from the first, and after the second sees less than a save free.
func TestTwoSavesOnARealTmpfs(t *testing.T) {
	dir := testkit.MountTmpfs(t, "size=64m")
	clock := testkit.NewClock(time.Now())
	g, err := New(Config{Paths: []string{dir}, Now: clock.Now, Writers: training(dir)})
	if err != nil {
		t.Fatal(err)
	}
	poll := func() Filesystem {
		clock.Advance(5 * time.Second)
		s := g.Poll(t.Context())
		if len(s.Filesystems) != 1 {
			t.Fatalf("snapshot %+v", s)
		}
		return s.Filesystems[0]
	}
	poll()
	for i := 1; i <= 2; i++ {
		if err := testkit.WriteFileOfSize(filepath.Join(dir, fmt.Sprintf("checkpoint-%d.pt", i)), 24*mib); err != nil {
			t.Fatal(err)
		}
		poll()
		poll()
		poll()
		f := poll()
		if f.SaveBytes != 24*mib || f.Stat.Avail != uint64(64-24*i)*mib {
			t.Fatalf("after save %d: save %d, avail %d", i, f.SaveBytes, f.Stat.Avail)
		}
	}
}

// TestStalledFuseMountIsHungNotAHang: the real statfs of a FUSE mount
// whose server never answers costs a poll the timeout, and the path is
// reported hung; a path beside it is read as ever.
func TestStalledFuseMountIsHungNotAHang(t *testing.T) {
	stalled := testkit.MountStalledFuse(t)
	ok := testkit.MountTmpfs(t, "size=8m")
	g, err := New(Config{Paths: []string{stalled, ok}, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var s Snapshot
		testkit.NoHang(t, "a poll of a stalled FUSE mount", func() { s = g.Poll(t.Context()) })
		if len(s.Unreadable) != 1 || s.Unreadable[0].Path != stalled || !s.Unreadable[0].Hung {
			t.Fatalf("poll %d: unreadable %+v, want %s hung", i, s.Unreadable, stalled)
		}
		if len(s.Filesystems) != 1 || s.Filesystems[0].Path != ok || s.Filesystems[0].Stat.Size != 8*mib {
			t.Fatalf("poll %d: filesystems %+v", i, s.Filesystems)
		}
	}
}
