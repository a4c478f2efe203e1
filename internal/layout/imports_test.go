// Package layout holds the test that keeps lavender's packages layered: which
// package may use which, transitively, as CONTRIBUTING.md's package table
// says. A new package must be added to the table before it builds here.
package layout

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/lavender-ml/lavender"

// mayUse lists, for every package of the module, the packages of the module
// it may depend on, directly or through another. Tests are not counted.
var mayUse = map[string][]string{
	// The module's root package holds only the version (VERSION).
	"lavender": {},
	"runlog":   {},
	// The watchdog reads the phases and their ends in phaseapi's types,
	// the ones the phase server keeps and the status page shows; it never
	// uses phaseapi's text cleaning (textsafe) to word anything.
	"watchdog": {"kmsg", "diskguard", "gpu", "internal/ring", "phaseapi", "internal/textsafe", "internal/backoff", "internal/lazyregexp"},
	// The kernel log reader and its parsers (OOM kills, Xids, storage
	// faults): a leaf that the exporter, the watchdog and cmd read.
	"kmsg": {"internal/lazyregexp"},
	// The heartbeat API's wire format, shared by the phase server and
	// heartbeat (client and phase run wrapper), which never import each
	// other: a client does not pull in the server.
	// It cleans reasons with textsafe, so a reason reads the same in the
	// run log as on the phone.
	"phaseapi":  {"internal/textsafe"},
	"heartbeat": {"phaseapi", "proctree", "internal/procfile", "internal/textsafe", "internal/backoff", "internal/lazyregexp"},
	// The host's collectors, in node_exporter's shape: procfs and the
	// kernel log, nothing of phases.
	"exporter": {"kmsg", "internal/throttle", "internal/procfile", "internal/lazyregexp"},
	// NVML's GPU telemetry, its collector and its Xid events: a leaf,
	// so the exporter, the watchdog, the texts and cmd can each read it
	// (the watchdog and pushtext hold its Device, never NVML).
	"gpu": {},
	// The heartbeat API's server side and the phase table: it judges the
	// phases' processes and hands the disk guard their directories, and
	// reads no host metric.
	"phaseserver": {"runlog", "phaseapi", "proctree", "diskguard", "internal/throttle", "internal/procfile", "internal/textsafe", "internal/lazyregexp"},
	// Who a process is, from procfs: alive, its parents, its host. The
	// phase server judges phase pids with it, the kernel-log readers victims.
	"proctree": {"internal/procfile"},
	// The Bark client alone: targets, templates, encryption, sending,
	// redaction. It knows nothing of Alertmanager, the watchdog, phases
	// or the run log.
	"bark": {"notify", "internal/targetfile", "internal/textsafe", "internal/lazyregexp"},
	// The ntfy client alone, the same shape as the Bark client's: targets,
	// headers, sending, sequence ids, redaction.
	"ntfy": {"notify", "internal/targetfile", "internal/textsafe", "internal/lazyregexp"},
	// The contract between delivery and the channels: one message, the
	// notifier interface, the failure classes, the secrets every channel
	// scrubs and the logger's scrub.
	"notify": {"internal/textsafe"},
	// Every push text, worded from the watchdog's facts; the arrows point
	// watchdog → pushtext → (watchpush, webhook) → delivery → (bark, …), so
	// the watchdog knows no text and no channel, and the texts know no
	// delivery.
	"pushtext": {"watchdog", "phaseapi", "kmsg", "diskguard", "gpu", "internal/ring", "internal/textsafe", "internal/backoff", "internal/lazyregexp"},
	// The one pipeline of every push: dedup, incidents, storm control,
	// fan-out to the channels' notifiers, the run log's line, the history
	// and the state file. It knows no Alertmanager and no watchdog (see
	// neverUse), and no words but a storm summary's.
	"delivery": {"bark", "ntfy", "notify", "runlog", "internal/throttle", "internal/ring", "internal/targetfile", "internal/textsafe", "internal/backoff", "internal/lazyregexp", "internal/statelock"},
	// Alertmanager's webhook: decodes alerts, words them with pushtext,
	// hands them to delivery.
	"webhook": {"delivery", "pushtext", "gpu", "bark", "ntfy", "notify", "runlog", "watchdog", "phaseapi", "kmsg", "diskguard", "internal/throttle", "internal/ring", "internal/targetfile", "internal/textsafe", "internal/backoff", "internal/lazyregexp", "internal/statelock"},
	// The watchdog's pushes: words them with pushtext, gives them their
	// incident ids and levels, hands them to delivery.
	"watchpush": {"delivery", "pushtext", "gpu", "bark", "ntfy", "notify", "runlog", "watchdog", "phaseapi", "kmsg", "diskguard", "internal/throttle", "internal/ring", "internal/targetfile", "internal/textsafe", "internal/backoff", "internal/lazyregexp", "internal/statelock"},
	// The status page reads the others' plain data and renders it; it
	// alone holds HTML. Nothing but cmd may use it (see below).
	"statuspage": {"phaseserver", "delivery", "gpu", "bark", "ntfy", "notify", "pushtext", "watchdog", "runlog", "phaseapi", "proctree", "kmsg", "internal/throttle", "internal/ring", "internal/targetfile", "internal/textsafe", "internal/procfile", "diskguard", "internal/backoff", "internal/lazyregexp", "internal/statelock"},
	// The disk guard reads statfs and learns from the numbers; what to
	// push about them is the watchdog's, so it imports nothing of ours.
	// The watchdog reads its readings and the phase server hands it the
	// phases' directories.
	"diskguard": {},
	// webguard decides who may write; it knows no handler of ours.
	"webguard": {},
	// webserve runs the HTTP servers (listeners, timeouts, graceful stop,
	// health endpoints); it too knows no handler of ours.
	"webserve": {},
	// cmd wires everything; bench drives the built binary and may read any
	// package's constants; deploy holds only tests of the deploy files.
	"cmd/lavender": {"*"},
	// app wires the serving commands from plain options; it may use every
	// product package, and only cmd uses it (see usedOnlyBy).
	"app": {"bark", "ntfy", "gpu", "delivery", "diskguard", "exporter", "heartbeat", "kmsg", "phaseapi", "phaseserver", "pushtext", "runlog", "statuspage",
		"watchdog", "watchpush", "webguard", "webhook", "webserve", "notify", "proctree", "internal/targetfile", "internal/textsafe", "internal/ring",
		"internal/throttle", "internal/procfile", "internal/backoff", "internal/lazyregexp", "internal/statelock"},
	// Takes SIGHUP from the first instant of the process, so it must
	// initialise before everything else: it may import nothing of ours.
	"cmd/lavender/internal/hangup": {},
	"bench/cmd/lavbench":           {"*"},
	"deploy":                       {"*"},
	"e2e":                          {"*"},
	"internal/layout":              {},
	// The shared test helpers use nothing of ours, so any package's
	// in-package tests can import them without a cycle.
	"internal/barktest": {"internal/testkit"},
	"internal/ntfytest": {"internal/testkit"},
	"internal/testkit":  {},
	// Run-log readers for tests; apart from the kit, since runlog's own
	// tests use the kit.
	"internal/runlogtest": {"runlog"},
	// Keeps a repeating failure's log lines to one per interval; the
	// exporter and the bridge use it for failed writes to the logs dir.
	"internal/throttle": {},
	// The one retry backoff: delivery's tries of a push and the watchdog's
	// retries of a push that reached no phone double their waits alike.
	"internal/backoff": {},
	// A fixed-size buffer of the newest values: the watchdog's samples
	// and the bridge's recent pushes.
	"internal/ring": {},
	// The lock beside a state file that keeps a second lavender off it:
	// delivery's state, and serve's watchdog state and kernel log position.
	"internal/statelock": {},
	// The one bounded, non-blocking reader of procfs and sysfs files, so
	// that a FIFO or /dev/zero in their place hangs and swells nothing.
	"internal/procfile": {},
	// Makes any text safe to show (valid UTF-8, no controls, no spoofing
	// characters) and cuts it with "…"; the texts, the client, the
	// bridge and the heartbeat API's reasons share it.
	"internal/textsafe": {},
	// What every channel's target files share: finding, reading safely,
	// the file:line error, the check's report. The channels use it.
	"internal/targetfile": {},
	// A regular expression compiled on first use, so that loading the
	// kernel log's or ntfy's patterns costs a short command nothing.
	"internal/lazyregexp": {},
	// The Python client (python/); its Go tests only run the Python ones.
	"python": {},
}

// usedOnlyBy lists packages that only the named packages may use, whatever
// their own entries in mayUse allow: the status page is wired by cmd and by
// nothing else, so no product package grows HTML through it.
var usedOnlyBy = map[string][]string{
	"statuspage": {"cmd/lavender", "app"},
	// app wires the commands; only cmd runs it.
	"app": {"cmd/lavender"},
	// cmd wires the packages; nothing wires cmd.
	"cmd/lavender": {},
}

// neverUse lists pairs kept apart whatever mayUse comes to allow: the phase
// server uses no collector (a phase never waits on a procfs read), the
// collectors and the webhook never use each other, delivery knows neither
// Alertmanager nor the watchdog, and a channel knows only its channel.
var neverUse = map[string][]string{
	"phaseserver": {"exporter"},
	"exporter":    {"phaseserver", "webhook", "delivery"},
	"webhook":     {"exporter", "phaseserver", "watchpush"},
	// Delivery knows neither Alertmanager nor the watchdog, nor their words.
	"delivery": {"webhook", "watchpush", "watchdog", "pushtext", "exporter", "phaseserver"},
	// A channel's notifier knows nothing but its channel.
	"bark": {"delivery", "webhook", "watchpush", "watchdog", "pushtext", "runlog", "ntfy"},
	"ntfy": {"delivery", "webhook", "watchpush", "watchdog", "pushtext", "runlog", "bark"},
}

// TestNeverUseAgreesWithMayUse: a pair kept apart is not also allowed.
func TestNeverUseAgreesWithMayUse(t *testing.T) {
	for name, never := range neverUse {
		allowed, known := mayUse[name]
		if !known {
			t.Errorf("neverUse names %s, which mayUse does not know", name)
		}
		for _, d := range never {
			if slices.Contains(allowed, d) || slices.Contains(allowed, "*") {
				t.Errorf("mayUse lets %s use %s, which neverUse forbids", name, d)
			}
		}
	}
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
		if p.ImportPath == module {
			name = "lavender" // the root package, which holds only the version
		}
		for _, dep := range p.Deps {
			d := strings.TrimPrefix(dep, module+"/")
			if users, ok := usedOnlyBy[d]; ok && d != dep && !slices.Contains(users, name) {
				t.Errorf("%s depends on %s, which only %v may use", name, d, users)
			}
		}
		for _, dep := range p.Deps {
			if d := strings.TrimPrefix(dep, module+"/"); d != dep && slices.Contains(neverUse[name], d) {
				t.Errorf("%s depends on %s, which it must never use", name, d)
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

// TestContributingTableMatches keeps CONTRIBUTING.md's package table, which
// people read, equal to mayUse, which this test enforces: every package in
// both, with the same "May import" column ("nothing", "anything", or the
// packages in backquotes; a row ending in "and what they use" lists only
// the packages it uses directly).
func TestContributingTableMatches(t *testing.T) {
	data, err := os.ReadFile("../../CONTRIBUTING.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "| Package | What it is | May import |\n")
	if !ok {
		t.Fatal("CONTRIBUTING.md has no package table (| Package | What it is | May import |)")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	quoted := regexp.MustCompile("`([^`]+)`")
	rows := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		names := quoted.FindAllStringSubmatch(cells[0], -1)
		name := names[len(names)-1][1] // `bench` (`bench/cmd/lavbench`): the package
		rows[name] = strings.TrimSuffix(cells[len(cells)-1], " |")
	}
	for name, allowed := range mayUse {
		col, ok := rows[name]
		if !ok {
			t.Errorf("CONTRIBUTING.md's package table has no row for %s", name)
			continue
		}
		var listed []string
		switch col {
		case "nothing":
		case "anything":
			listed = []string{"*"}
		default:
			for _, m := range quoted.FindAllStringSubmatch(col, -1) {
				listed = append(listed, m[1])
			}
		}
		want := slices.Sorted(slices.Values(allowed))
		slices.Sort(listed)
		if strings.HasSuffix(col, "and what they use") {
			for _, l := range listed {
				if !slices.Contains(want, l) {
					t.Errorf("CONTRIBUTING.md says %s may import %s; mayUse does not allow it", name, l)
				}
			}
			continue
		}
		if !slices.Equal(listed, want) {
			t.Errorf("CONTRIBUTING.md says %s may import %q; mayUse says %q", name, listed, want)
		}
	}
	for name := range rows {
		if _, ok := mayUse[name]; !ok {
			t.Errorf("CONTRIBUTING.md lists %s, which mayUse does not know", name)
		}
	}
}
