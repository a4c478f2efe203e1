package proctree

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// The mount table of a host with procfs mounted every way hidepid= allows,
// as the kernel spells the options in mountinfo.
func TestMountVisibility(t *testing.T) {
	table, err := os.ReadFile("testdata/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		point   string
		mounted bool
		hidePID string
		gid     int
		hiding  bool
	}{
		{"/proc", true, "", -1, false},
		{"/run/ns/invisible", true, "invisible", -1, true},
		{"/run/ns/old-style", true, "2", -1, true},
		{"/run/ns/noaccess", true, "noaccess", 27, true},
		{"/run/ns/ptraceable", true, "ptraceable", -1, true},
		{"/run/ns/off", true, "off", -1, false},
		{"/run/ns/with space", true, "invisible", -1, true},
		// A plain procfs mounted over a hiding one: the top one counts.
		{"/run/ns/stacked", true, "", -1, false},
		{"/run/ns/tmpfs", false, "", -1, false},
		{"/run/ns/optional", true, "invisible", -1, true},
		{"/nowhere", false, "", -1, false},
	} {
		t.Run(tc.point, func(t *testing.T) {
			v := mountVisibility(table, tc.point)
			if v.Mounted != tc.mounted || v.HidePID != tc.hidePID || v.GID != tc.gid {
				t.Errorf("got %+v, want mounted %v, hidepid %q, gid %d", v, tc.mounted, tc.hidePID, tc.gid)
			}
			if got := hidingModes[v.HidePID]; got != tc.hiding {
				t.Errorf("hidepid=%s hides: %v, want %v", v.HidePID, got, tc.hiding)
			}
		})
	}
}

// A procfs that is not this process's own pid namespace (a fake one here,
// whose pid is this very process) is never second-guessed with kill(2):
// its pids are not the kernel's pids for this process.
func TestJudgeAsksTheKernelOnlyOfItsOwnProcfs(t *testing.T) {
	fake := t.TempDir()
	if err := os.Symlink("4242", filepath.Join(fake, "self")); err != nil {
		t.Fatal(err)
	}
	l, _, err := Judge(fake, os.Getpid(), 0)
	if err != nil || l != Gone {
		t.Errorf("Judge of a pid the fake procfs lacks = %v, %v; want gone", l, err)
	}
	if v, err := ReadVisibility(fake); err == nil || v.Mounted || v.Hides {
		t.Errorf("ReadVisibility of a fake procfs = %+v, %v; want an error and nothing known", v, err)
	}
}

// Without hiding, Judge agrees with procfs: a living child is living, and
// once killed and reaped it is gone.
func TestJudgeRealProcess(t *testing.T) {
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	l, start, err := Judge("", pid, 0)
	if err != nil || l != Living || start == 0 {
		t.Fatalf("Judge(child) = %v, %d, %v; want living with a start", l, start, err)
	}
	if l, _, _ := Judge("", pid, start+1); l != Gone {
		t.Errorf("Judge(child, another start) = %v, want gone (a reused pid)", l)
	}
	child.Process.Kill()
	child.Wait()
	if l, _, err := Judge("", pid, start); err != nil || l != Gone {
		t.Errorf("Judge(reaped child) = %v, %v; want gone", l, err)
	}
}

// judgeEnv carries the procfs and the pid to TestJudgeAsNobody.
const judgeEnv = "PROCTREE_JUDGE"

// TestJudgeAsNobody is run by the hidepid tests as the user nobody: it
// prints what Judge and ReadVisibility say there.
func TestJudgeAsNobody(t *testing.T) {
	arg := os.Getenv(judgeEnv)
	if arg == "" {
		t.Skip("run by TestHiddenProcessIsNotGone as the user nobody")
	}
	root, pidText, _ := strings.Cut(arg, ":")
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := ReadStat(root, pid)
	l, _, err := Judge(root, pid, 0)
	v, verr := ReadVisibility(root)
	fmt.Printf("VERDICT stat-error=%v judge=%v err=%v hides=%v mount=%s visibility-err=%v\n", statErr != nil, l, err, v.Hides, v, verr)
}

// Under a procfs mounted with hidepid=, as systemd's ProtectProc= mounts
// one, a process of root is missing (invisible) or closed (noaccess) to
// nobody: Judge must say unseen, not gone, and ReadVisibility that the
// mount hides. Once the process is killed and reaped, kill(2) says ESRCH
// and Judge says gone after all. Root itself sees through hidepid.
func TestHiddenProcessIsNotGone(t *testing.T) {
	for _, mode := range []string{"invisible", "noaccess", "2"} {
		t.Run(mode, func(t *testing.T) {
			root := testkit.MountProc(t, "hidepid="+mode)
			child := exec.Command("sleep", "60")
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				child.Process.Kill()
				child.Wait()
			}()
			pid := child.Process.Pid
			asNobody := func() string {
				t.Helper()
				out, err := testkit.RunTestAs(t, testkit.NobodyID, "TestJudgeAsNobody", fmt.Sprintf("%s=%s:%d", judgeEnv, root, pid))
				if err != nil {
					t.Fatalf("as nobody: %v\n%s", err, out)
				}
				for line := range strings.Lines(out) {
					if strings.HasPrefix(line, "VERDICT ") {
						return strings.TrimSpace(line)
					}
				}
				t.Fatalf("as nobody: no verdict in\n%s", out)
				return ""
			}
			got := asNobody()
			if want := "VERDICT stat-error=true judge=unseen err=<nil> hides=true"; !strings.HasPrefix(got, want) {
				t.Errorf("root's living process, judged by nobody:\n%s\nwant it to start with\n%s", got, want)
			}
			if l, _, err := Judge(root, pid, 0); l != Living || err != nil {
				t.Errorf("judged by root: %v, %v; want living (root sees through hidepid)", l, err)
			}
			if v, err := ReadVisibility(root); err != nil || !v.Mounted || v.Hides {
				t.Errorf("ReadVisibility as root = %+v, %v; want a mount that hides nothing from root", v, err)
			}
			child.Process.Kill()
			child.Wait()
			got = asNobody()
			if want := "VERDICT stat-error=true judge=gone err=<nil> hides=true"; !strings.HasPrefix(got, want) {
				t.Errorf("root's reaped process, judged by nobody:\n%s\nwant it to start with\n%s", got, want)
			}
		})
	}
}
