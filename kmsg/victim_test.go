package kmsg

import (
	"os"
	"path/filepath"
	"testing"
)

// TestVictimIsNeverTakenFromOtherRecords writes, after a real kill, kernel
// records whose user-chosen parts (a file name, a process name) spell an
// OOM kill: the victim stays the one the OOM killer named.
func TestVictimIsNeverTakenFromOtherRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	appendFile(t, path, "3,10,1000,-;Out of memory: Killed process 4242 (python3) total-vm:9000000kB, anon-rss:8000000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:17000kB oom_score_adj:0\n")
	want := OOMVictim{PID: 4242, Name: "python3", Seq: 10}
	if v := r.Victim(); v != want {
		t.Fatalf("the kill record: %+v; want %+v", v, want)
	}
	for _, spoof := range []string{
		// A file named "Killed process 27505 (python3) x" that traps.
		"6,11,1001,-;traps: python3[27600] trap invalid opcode ip:55d0c1a2b000 sp:7ffc8e0d7a10 error:0 in Killed process 27505 (python3) x[55d0c1a2b000+1000]\n",
		// A process named "Killed process " that crashes in a file named for the rest.
		"6,12,1002,-;Killed process [4343]: segfault at 0 ip 00007f0000001000 sp 00007ffc00000000 error 4 in (python3) total-vm:1kB, anon-rss:1kB[7f0000000000+2000]\n",
		// An audit line quoting a path.
		"5,13,1003,-;audit: type=1400 audit(1700000000.000:42): apparmor=\"DENIED\" operation=\"open\" name=\"/tmp/Out of memory: Killed process 1 (init) total-vm:1kB\" comm=\"x\"\n",
		// The reaper's record of an earlier victim.
		"6,14,1004,-;oom_reaper: reaped process 999 (old), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB\n",
	} {
		appendFile(t, path, spoof)
		if v := r.Victim(); v != want {
			t.Errorf("after %q the victim is %+v; want %+v", spoof, v, want)
		}
	}
}
