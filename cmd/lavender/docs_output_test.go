package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// The tests in this file run the examples the pages show against the
// built binary, so that a page never shows output lavender does not print.

// runBinary runs the built lavender in dir with args and returns its
// stdout, its stderr and its exit code.
func runBinary(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LAVENDER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("lavender %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

var fenceBodyRE = regexp.MustCompile("(?ms)^[ \t]*```[a-z]*\n(.*?)^[ \t]*```")

// codeBlocks are the fenced blocks of a page, each without its fences and
// with the indentation of its first line taken off every line.
func codeBlocks(page string) []string {
	var out []string
	for _, m := range fenceBodyRE.FindAllStringSubmatch(page, -1) {
		body := m[1]
		indent := body[:len(body)-len(strings.TrimLeft(body, " "))]
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
			lines = append(lines, strings.TrimPrefix(l, indent))
		}
		out = append(out, strings.Join(lines, "\n"))
	}
	return out
}

// blockStartingWith is the one code block of page whose first line starts
// with prefix.
func blockStartingWith(t *testing.T, name, page, prefix string) string {
	t.Helper()
	var found []string
	for _, b := range codeBlocks(page) {
		if strings.HasPrefix(b, prefix) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d code blocks start with %q, want 1", name, len(found), prefix)
	}
	return found[0]
}

// shownOutput is what a page shows a command print: the "# " lines that
// follow the line running it in a code block.
func shownOutput(block, command string) []string {
	var out []string
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, command) {
			continue
		}
		for _, next := range lines[i+1:] {
			rest, ok := strings.CutPrefix(next, "# ")
			if !ok {
				break
			}
			out = append(out, rest)
		}
	}
	return out
}

// TestDocsShowTheVersionReport: configuration.md's `lavender version`
// example has the lines the binary prints, bar those the build may leave
// out.
func TestDocsShowTheVersionReport(t *testing.T) {
	shown := strings.Split(blockStartingWith(t, "docs/configuration.md", docPages(t)["docs/configuration.md"], "lavender, version"), "\n")
	out, _, code := runBinary(t, t.TempDir(), "version")
	if code != 0 {
		t.Fatalf("lavender version exits %d", code)
	}
	printed := strings.Split(strings.TrimSpace(out), "\n")
	if head, rest, _ := strings.Cut(printed[0], " ("); head != shown[0] || (rest != "" && !strings.HasPrefix(rest, "revision:") && !strings.HasPrefix(rest, "branch:")) {
		t.Errorf("docs show %q, lavender version prints %q", shown[0], printed[0])
	}
	keys := func(lines []string) map[string]bool {
		out := map[string]bool{}
		for _, l := range lines[1:] {
			k, _, _ := strings.Cut(strings.TrimSpace(l), ":")
			out[k] = true
		}
		return out
	}
	shownKeys, printedKeys := keys(shown), keys(printed)
	for k := range shownKeys {
		if !printedKeys[k] {
			t.Errorf("docs show a %q line; lavender version prints %q", k, printed)
		}
	}
	for k := range printedKeys {
		optional := k == "commit date" || k == "build user" || k == "build date" || k == "tags"
		if !shownKeys[k] && !optional {
			t.Errorf("lavender version prints a %q line the docs leave out", k)
		}
	}
}

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
	for path, page := range docPages(t) {
		for _, b := range codeBlocks(page) {
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

// barkPage is docs/bark.md.
func barkPage(t *testing.T) string {
	t.Helper()
	return docPages(t)["docs/bark.md"]
}

// TestDocsShowWhatBarkCheckPrints: bark.md's example file, checked, gives
// the lines the page shows; so does its encryption example.
func TestDocsShowWhatBarkCheckPrints(t *testing.T) {
	page := barkPage(t)
	example := blockStartingWith(t, "docs/bark.md", page, "# phone.bark.env: one URL template a line")
	shown := shownOutput(blockStartingWith(t, "docs/bark.md", page, "lavender bark check"), "lavender bark check")
	if len(shown) == 0 {
		t.Fatal("docs/bark.md shows no output of lavender bark check")
	}
	dir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": example + "\n"})
	out, stderr, code := runBinary(t, dir, "bark", "check", "--bark.config-dir=.")
	if code != 0 {
		t.Fatalf("bark check of docs/bark.md's example exits %d: %s", code, stderr)
	}
	if printed := strings.Split(strings.TrimSpace(out), "\n"); strings.Join(printed, "\n") != strings.Join(shown, "\n") {
		t.Errorf("docs/bark.md shows bark check print\n%s\nbut it prints\n%s", strings.Join(shown, "\n"), out)
	}

	encrypted := blockStartingWith(t, "docs/bark.md", page, "# phone.bark.env\nBARK_ENCRYPTION=")
	promise := regexp.MustCompile("`(phone\\.bark\\.env:[0-9]+ ok \\([^)]*\\))`").FindStringSubmatch(page[strings.Index(page, "BARK_ENCRYPTION="):])
	if promise == nil {
		t.Fatal("docs/bark.md's encryption steps show no `phone.bark.env:N ok (…)` line")
	}
	dir = barktest.ConfigDir(t, map[string]string{"phone.bark.env": encrypted + "\n"})
	out, stderr, code = runBinary(t, dir, "bark", "check", "--bark.config-dir=.")
	if first, _, _ := strings.Cut(out, "\n"); code != 0 || first != promise[1] {
		t.Errorf("docs/bark.md promises %q for its encryption example; bark check prints %q %q (exit %d)", promise[1], out, stderr, code)
	}
}

// TestDocsShowWhatTheUntouchedExampleGives: the README's words for a
// phone.bark.env still holding the example's placeholder are what bark
// check and bark send print, and nothing is pushed.
func TestDocsShowWhatTheUntouchedExampleGives(t *testing.T) {
	readme := strings.Join(strings.Fields(docPages(t)["README.md"]), " ")
	m := regexp.MustCompile("`(phone\\.bark\\.env:7: not configured: [^`]+)`").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README does not say what bark check prints for the untouched example")
	}
	example, err := os.ReadFile(filepath.Join(repoRoot, ".bark.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	dir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": string(example)})
	for _, args := range [][]string{{"check"}, {"send", "--test"}, {"bark", "check"}, {"bark", "send", "--test"}} {
		out, stderr, code := runBinary(t, dir, append(args, "--bark.config-dir=.")...)
		if code == 0 || strings.Count(out+stderr, m[1]) != 1 || strings.Contains(out, " ok") {
			t.Errorf("lavender %s of the untouched example: exit %d, stdout %q, stderr %q; README says %q",
				strings.Join(args, " "), code, out, stderr, m[1])
		}
	}
}

// TestDocsShowTheTestPush: `send --test` pushes the text the README
// shows, with the parameters bark.md says every push carries.
func TestDocsShowTheTestPush(t *testing.T) {
	m := regexp.MustCompile(`lavender send --test +# the phone shows "([^"]+)"`).FindStringSubmatch(docPages(t)["README.md"])
	if m == nil {
		t.Fatal(`README's Quick start shows no "lavender send --test   # the phone shows "…"" line`)
	}
	bark := barktest.New(t)
	dir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.Template(barktest.Key) + "\n"})
	out, stderr, code := runBinary(t, dir, "send", "--test", "--bark.config-dir=.")
	if code != 0 || out != "phone.bark.env:1 ok\n" {
		t.Fatalf("send --test: exit %d, %q %q", code, out, stderr)
	}
	pushes := bark.Pushes()
	if len(pushes) != 1 {
		t.Fatalf("Bark got %d pushes, want 1", len(pushes))
	}
	p := pushes[0]
	// A quote ending in "…" shows how the push begins.
	if shown, cut := strings.CutSuffix(m[1], " …"); p.Body != m[1] && !(cut && strings.HasPrefix(p.Body, shown+" ")) {
		t.Errorf("README says the phone shows %q; bark send --test pushed %q", m[1], p.Body)
	}
	if !strings.Contains(barkPage(t), "`level=passive&isArchive=0` is appended to every template") || p.Params["level"] != "passive" || p.Params["isarchive"] != "0" {
		t.Errorf("docs/bark.md says level=passive&isArchive=0 is appended to every template; the push carried %v", p.Params)
	}
	if strings.Contains(barkPage(t), "`bark send`\n  and storm control's summary carry no `id`") && p.Params["id"] != "" {
		t.Errorf("docs/bark.md says bark send carries no id; the push carried id=%q", p.Params["id"])
	}
}

// shownDefaultRE finds a default a page gives in passing: "`--flag` (5s)"
// or "`--flag` (default `:9877`, …)"; a value, not a word, so that
// "`--path.procfs` (meminfo, …)" is not taken for one.
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
	for path, page := range docPages(t) {
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
	err := filepath.WalkDir(filepath.Join(repoRoot, "python", "lavender"), func(path string, d os.DirEntry, err error) error {
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
	for path, page := range docPages(t) {
		for i, line := range strings.Split(page, "\n") {
			for _, name := range envNameRE.FindAllString(line, -1) {
				if !known[name] && !testEnvironment[name] && !strings.HasSuffix(name, "_") {
					t.Errorf("%s:%d names %s, which no flag reads", path, i+1, name)
				}
			}
		}
	}
}

var shownFlagErrorRE = regexp.MustCompile("`(lavender: --([a-z][a-z0-9.-]*) [^`]*, not ([^`]+))`")

// TestDocsShowTheFlagErrors: an error a page quotes for a bad flag value,
// such as "lavender: --watchdog.threshold must be in (0, 1], not 1.5", is
// what serve prints for that value.
func TestDocsShowTheFlagErrors(t *testing.T) {
	var checked int
	for path, page := range docPages(t) {
		for _, m := range shownFlagErrorRE.FindAllStringSubmatch(strings.Join(strings.Fields(page), " "), -1) {
			checked++
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cmd := exec.CommandContext(ctx, testkit.Binary(t), "serve", "--"+m[2]+"="+m[3],
				"--web.listen-address=127.0.0.1:0", "--runlog.dir="+t.TempDir(), "--bark.config-dir="+t.TempDir())
			out, err := cmd.CombinedOutput()
			timedOut := ctx.Err() != nil
			cancel()
			if err == nil || timedOut || !strings.Contains(string(out), m[1]) {
				t.Errorf("%s quotes %q; lavender serve --%s=%s printed %q (%v)", path, m[1], m[2], m[3], out, err)
			}
		}
	}
	if checked == 0 {
		t.Error("no page quotes a flag error any more; drop this test or the pattern is wrong")
	}
}
