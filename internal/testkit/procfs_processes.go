package testkit

import (
	"os"
	"path/filepath"
	"strconv"
)

// LinkRealHost makes the fake procfs name this host's boot and pid
// namespace (sys, self) and boot time (stat) through links to /proc, so
// that a server reading it judges real pids, which LinkProcess adds.
func (p *Procfs) LinkRealHost() {
	p.t.Helper()
	for _, name := range []string{"self", "sys", "stat"} {
		p.link(name, filepath.Join("/proc", name))
	}
}

// LinkProcess shows the real process pid in the fake procfs, as a link to
// /proc/<pid>: once the process is gone and reaped, the link dangles and
// the pid reads as gone, as in /proc itself.
func (p *Procfs) LinkProcess(pid int) {
	p.t.Helper()
	p.link(strconv.Itoa(pid), filepath.Join("/proc", strconv.Itoa(pid)))
}

func (p *Procfs) link(name, target string) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := os.Symlink(target, filepath.Join(p.Dir, name)); err != nil {
		p.t.Fatalf("testkit: fake procfs: %v", err)
	}
}
