package main

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// The tests in this file hold what the pages show (the run log serve
// writes, defaults, environment variables) to what lavender does, in
// process. Those comparing the pages with what the built binary prints and
// its exit codes are in e2e/docs_output_test.go.

var (
	digitsRE = regexp.MustCompile(`[0-9]`)
	deviceRE = regexp.MustCompile(`device=\S+`)
	offsetRE = regexp.MustCompile(` [+-]0000$`)
)

// runLogShape is a run-log line with its figures and device made alike.
func runLogShape(line string) string {
	line = digitsRE.ReplaceAllString(line, "0")
	line = offsetRE.ReplaceAllString(line, " +0000")
	return deviceRE.ReplaceAllString(line, "device=D")
}

// TestDocsShowTheRunLogServeWrites: the run logs the pages show start with
// the title, header and first entry that `lavender serve` writes.
func TestDocsShowTheRunLogServeWrites(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	serve := startInProcess(t, nil, testkit.QuietServeArgs(t, t.TempDir(), logDir)...)
	testkit.WaitReady(t, nil, serve.base, "", "")
	runs, _ := filepath.Glob(filepath.Join(logDir, "run-*.log"))
	if len(runs) != 1 {
		t.Fatalf("serve made %d run logs in %s, want 1", len(runs), logDir)
	}
	data, err := os.ReadFile(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	written := strings.Split(string(data), "\n")
	if len(written) < 3 {
		t.Fatalf("serve's run log %q has no first entry", data)
	}
	want := map[string]string{
		"title":       runLogShape(written[0]),
		"header":      runLogShape(written[1]),
		"first entry": runLogShape(written[2]),
	}
	var checked int
	for path, page := range testkit.DocPages(t) {
		for _, b := range testkit.CodeBlocks(page) {
			lines := strings.Split(b, "\n")
			if len(lines) < 3 || !strings.HasPrefix(lines[0], "# lavender-2 run log ") || strings.HasPrefix(lines[1], "# [") {
				continue
			}
			checked++
			for i, part := range []string{"title", "header", "first entry"} {
				if got := runLogShape(lines[i]); got != want[part] && !(part == "header" && !strings.HasPrefix(lines[1], "# device=")) {
					t.Errorf("%s shows the run log's %s as %q; serve writes %q", path, part, lines[i], written[i])
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no page shows a run log that starts with its title")
	}
}

var shownDefaultRE = regexp.MustCompile("`--([a-z][a-z0-9.-]*)` \\((?:default:? )?`?([0-9.:/][0-9A-Za-z.:/_-]*(?: MiB)?)`?[,;)]")

// defaultFlagRE finds a default shown as a flag: "By default lavender
// listens on every interface (`--web.listen-address=:9877`)".
var defaultFlagRE = regexp.MustCompile("(?i)default[^`]{0,60}\\(`--([a-z][a-z0-9.-]*)=([^`]+)`\\)")

// sameValue says whether a default as a page gives it is the flag's.
func sameValue(shown, def string) bool {
	if shown == def {
		return true
	}
	if n, ok := strings.CutSuffix(shown, " MiB"); ok {
		f, err := strconv.ParseFloat(n, 64)
		return err == nil && strconv.Itoa(int(f*(1<<20))) == def
	}
	if a, err := strconv.ParseFloat(shown, 64); err == nil {
		b, err := strconv.ParseFloat(def, 64)
		return err == nil && math.Abs(a-b) < 1e-12
	}
	if a, err := time.ParseDuration(shown); err == nil {
		b, err := time.ParseDuration(def)
		return err == nil && a == b
	}
	return false
}

// TestDocsGiveTheRealDefaults: a default a page gives in passing is the
// one the flag has.
func TestDocsGiveTheRealDefaults(t *testing.T) {
	defaults := map[string][]string{}
	_ = kong.Visit(model(t).Node, func(v kong.Visitable, next kong.Next) error {
		if f, ok := v.(*kong.Flag); ok {
			d := f.Default
			if !f.HasDefault && f.PlaceHolder != "" && !metavarRE.MatchString(f.PlaceHolder) {
				d = f.PlaceHolder
			}
			defaults[f.Name] = append(defaults[f.Name], d)
		}
		return next(nil)
	})
	var checked int
	for path, page := range testkit.DocPages(t) {
		text := strings.Join(strings.Fields(page), " ")
		for _, m := range append(shownDefaultRE.FindAllStringSubmatch(text, -1), defaultFlagRE.FindAllStringSubmatch(text, -1)...) {
			name, shown := m[1], m[2]
			if defaults[name] == nil {
				continue // TestDocsNameRealFlags reports it
			}
			checked++
			var ok bool
			for _, d := range defaults[name] {
				ok = ok || sameValue(shown, d)
			}
			if !ok {
				t.Errorf("%s gives --%s's default as %q; it is %q", path, name, shown, defaults[name])
			}
		}
	}
	if checked == 0 {
		t.Error("found no default given in passing; has the pattern changed?")
	}
}

var envNameRE = regexp.MustCompile(`\bLAVENDER_[A-Z0-9_]+\b`)

// testEnvironment are the LAVENDER_ variables that the tests and benchmarks
// read, not the binary.
var testEnvironment = map[string]bool{"LAVENDER_E2E": true, "LAVENDER_NTFY_SERVER": true, "LAVENDER_SLOW": true, "LAVENDER_SCREENSHOT_DIR": true, "LAVENDER_FRAMEWORKS": true, testkit.BinaryEnv: true}

// pythonClientEnvironment are the LAVENDER_ variables the Python client
// (python/lavender) reads.
func pythonClientEnvironment(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(testkit.RepoRoot(t), "python", "lavender"), func(path string, d os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return filepath.SkipAll
		}
		if err != nil || d.IsDir() || filepath.Ext(path) != ".py" {
			return err
		}
		data, err := os.ReadFile(path)
		for _, name := range envNameRE.FindAllString(string(data), -1) {
			known[name] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return known
}

// TestDocsNameRealEnvironmentVariables: every LAVENDER_ variable a page
// names is one a flag or the Python client reads, or one the tests read.
func TestDocsNameRealEnvironmentVariables(t *testing.T) {
	known := pythonClientEnvironment(t)
	_ = kong.Visit(model(t).Node, func(v kong.Visitable, next kong.Next) error {
		if f, ok := v.(*kong.Flag); ok {
			for _, e := range f.Envs {
				known[e] = true
			}
		}
		return next(nil)
	})
	for path, page := range testkit.DocPages(t) {
		for i, line := range strings.Split(page, "\n") {
			for _, name := range envNameRE.FindAllString(line, -1) {
				if !known[name] && !testEnvironment[name] && !strings.HasSuffix(name, "_") {
					t.Errorf("%s:%d names %s, which no flag reads", path, i+1, name)
				}
			}
		}
	}
}
