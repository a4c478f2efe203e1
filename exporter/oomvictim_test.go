package exporter

import (
	"os"
	"path/filepath"
	"testing"
)

func appendKmsg(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// TestOOMVictimReader feeds a fake kernel log: records from before the
// reader opened are ignored, both of the kernel's record forms name the
// victim, and a kill's two records are one victim.
func TestOOMVictimReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	old := "6,100,5000,-;Out of memory: Killed process 111 (old-run) total-vm:1kB, anon-rss:1kB\n"
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenOOMVictimReader(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if v, err := r.Read(); err != nil || v != (OOMVictim{}) {
		t.Fatalf("a kill from before the start is named: %+v, %v", v, err)
	}

	appendKmsg(t, path, "4,200,6000,-;python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0\n"+
		" SUBSYSTEM=memory\n"+
		"6,201,6001,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=python3,pid=4242,uid=1000\n")
	want := OOMVictim{PID: 4242, Name: "python3", Seq: 201}
	if v, err := r.Read(); err != nil || v != want {
		t.Fatalf("after the oom-kill record: %+v, %v; want %+v", v, err, want)
	}
	appendKmsg(t, path, "3,202,6002,-;Out of memory: Killed process 4242 (python3) total-vm:9000000kB, anon-rss:8000000kB, file-rss:0kB\n")
	if v, _ := r.Read(); v != want {
		t.Errorf("the kill's second record made a new victim: %+v", v)
	}

	// A cgroup kill, split across two writes mid-line.
	appendKmsg(t, path, "3,310,7000,-;Memory cgroup out of memory: Killed process 77 (data loader")
	if v, _ := r.Read(); v != want {
		t.Errorf("half a record changed the victim: %+v", v)
	}
	appendKmsg(t, path, ") total-vm:1kB\n")
	if v, _ := r.Read(); v != (OOMVictim{PID: 77, Name: "data loader", Seq: 310}) {
		t.Errorf("cgroup kill: %+v", v)
	}
}

func TestOOMVictimReaderBoundedPerRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenOOMVictimReader(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	// Far more data than one Read takes: the newest kill, at the end, is
	// found only by a later Read.
	var flood []byte
	line := []byte("6,1,1,-;noise noise noise noise noise noise noise noise noise noise noise noise\n")
	for len(flood) < (maxKmsgRecordsPerRead+1)*kmsgRecordBytes {
		flood = append(flood, line...)
	}
	appendKmsg(t, path, string(flood)+"6,9,9,-;Out of memory: Killed process 9 (late) total-vm:1kB\n")
	if v, _ := r.Read(); v.PID != 0 {
		t.Fatalf("one Read read past its bound: %+v", v)
	}
	var v OOMVictim
	for range 3 {
		v, _ = r.Read()
	}
	if v.PID != 9 || v.Name != "late" {
		t.Errorf("later Reads missed the kill: %+v", v)
	}
}

func TestOOMVictimReaderUnreadable(t *testing.T) {
	if _, err := OpenOOMVictimReader(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing kernel log opened")
	}
}

// TestOOMVictimReaderRealKmsg reads the real device where this test may:
// it must not block, and must name no kill from before it opened.
func TestOOMVictimReaderRealKmsg(t *testing.T) {
	r, err := OpenOOMVictimReader(DefaultKmsgPath)
	if err != nil {
		t.Skipf("kernel log not readable here: %v", err)
	}
	defer r.Close()
	if v, err := r.Read(); err != nil || v.PID != 0 {
		t.Errorf("fresh reader: %+v, %v", v, err)
	}
}
