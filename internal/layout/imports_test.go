// Package layout holds the test that keeps lavender's packages layered: which
// package may use which, transitively, as CONTRIBUTING.md's package table
// says. A new package must be added to the table before it builds here.
package layout

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "lavender"

// mayUse lists, for every package of the module, the packages of the module
// it may depend on, directly or through another. Tests are not counted.
var mayUse = map[string][]string{
	"runlog":   {},
	"watchdog": {"kmsg", "diskguard", "internal/ring"},
	// The kernel log reader and its parsers (OOM kills, Xids, storage
	// faults): a leaf that the exporter, the watchdog and cmd read.
	"kmsg": {},
	// The heartbeat API's wire format, shared by the exporter (server) and
	// heartbeat (client and phase run wrapper), which never import each
	// other: a client does not pull in the collectors.
	"phaseapi":  {},
	"heartbeat": {"phaseapi", "proctree", "internal/procfile"},
	"exporter":  {"runlog", "phaseapi", "proctree", "kmsg", "diskguard", "internal/throttle", "internal/procfile"},
	// Who a process is, from procfs: alive, its parents, its host. The
	// exporter judges phase pids with it, the kernel-log readers victims.
	"proctree": {"internal/procfile"},
	// The Bark client alone: targets, templates, encryption, sending,
	// redaction. It knows nothing of Alertmanager, the watchdog, phases
	// or the run log.
	"bark": {"internal/textsafe"},
	// Every push text, worded from the watchdog's facts; the arrows point
	// watchdog → pushtext → barkbridge → bark, so the watchdog knows no
	// text and no Bark, and the texts know no delivery.
	"pushtext":   {"watchdog", "kmsg", "diskguard", "internal/ring", "internal/textsafe"},
	"barkbridge": {"bark", "pushtext", "runlog", "watchdog", "kmsg", "diskguard", "internal/throttle", "internal/ring", "internal/textsafe"},
	// The status page reads the others' plain data and renders it; it
	// alone holds HTML. Nothing but cmd may use it (see below).
	"statuspage": {"exporter", "barkbridge", "bark", "pushtext", "watchdog", "runlog", "phaseapi", "proctree", "kmsg", "internal/throttle", "internal/ring", "internal/textsafe", "internal/procfile", "diskguard"},
	// The disk guard reads statfs and learns from the numbers; what to
	// push about them is the watchdog's, so it imports nothing of ours.
	// The watchdog reads its readings and the exporter hands it the
	// phases' directories, as both do with the kernel log's faults.
	"diskguard": {},
	// webguard decides who may write; it knows no handler of ours.
	"webguard": {},
	// cmd wires everything; bench drives the built binary and may read any
	// package's constants; deploy holds only tests of the deploy files.
	"cmd/lavender": {"*"},
	// Takes SIGHUP from the first instant of the process, so it must
	// initialise before everything else: it may import nothing of ours.
	"cmd/lavender/internal/hangup": {},
	"bench/cmd/lavbench":           {"*"},
	"deploy":                       {"*"},
	"internal/layout":              {},
	// The shared test helpers use nothing of ours, so any package's
	// in-package tests can import them without a cycle.
	"internal/barktest": {"internal/testkit"},
	"internal/testkit":  {},
	// Run-log readers for tests; apart from the kit, since runlog's own
	// tests use the kit.
	"internal/runlogtest": {"runlog"},
	// Keeps a repeating failure's log lines to one per interval; the
	// exporter and the bridge use it for failed writes to the logs dir.
	"internal/throttle": {},
	// A fixed-size buffer of the newest values: the watchdog's samples
	// and the bridge's recent pushes.
	"internal/ring": {},
	// The one bounded, non-blocking reader of procfs and sysfs files, so
	// that a FIFO or /dev/zero in their place hangs and swells nothing.
	"internal/procfile": {},
	// Makes any text safe to show (valid UTF-8, no controls, no spoofing
	// characters) and cuts it with "…"; the texts, the client and the
	// bridge share it.
	"internal/textsafe": {},
	// The Python client (python/); its Go tests only run the Python ones.
	"python": {},
}

// usedOnlyBy lists packages that only the named packages may use, whatever
// their own entries in mayUse allow: the status page is wired by cmd and by
// nothing else, so no product package grows HTML through it.
var usedOnlyBy = map[string][]string{
	"statuspage": {"cmd/lavender"},
}

type listed struct {
	ImportPath string
	Deps       []string
}

func TestPackagesKeepTheirLayer(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Deps", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		seen++
		name := strings.TrimPrefix(p.ImportPath, module+"/")
		for _, dep := range p.Deps {
			d := strings.TrimPrefix(dep, module+"/")
			if users, ok := usedOnlyBy[d]; ok && d != dep && !slices.Contains(users, name) {
				t.Errorf("%s depends on %s, which only %v may use", name, d, users)
			}
		}
		allowed, known := mayUse[name]
		if !known {
			t.Errorf("package %s is not in the layer table: add it to mayUse with what it may use", name)
			continue
		}
		if slices.Contains(allowed, "*") {
			continue
		}
		for _, dep := range p.Deps {
			if !strings.HasPrefix(dep, module+"/") {
				continue
			}
			if d := strings.TrimPrefix(dep, module+"/"); !slices.Contains(allowed, d) {
				t.Errorf("%s depends on %s; it may use only %v", name, d, allowed)
			}
		}
	}
	if seen < len(mayUse)-1 {
		t.Errorf("go list found %d packages, fewer than the table's %d", seen, len(mayUse))
	}
}
