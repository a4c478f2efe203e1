package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// The tests in this file run the examples the pages show against the
// built binary, so that a page never shows output lavender does not print
// or an exit code it does not return. What the pages show of a command's
// behaviour is checked in process, in cmd/lavender's docs tests.

// runBinary runs the built lavender in dir with args to its end, as
// testkit starts it (no LAVENDER_* from the test's environment, a data race
// it reports fails the test), and returns its stdout, its stderr and its
// exit code.
func runBinary(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	c := testkit.StartCommandWith(t, testkit.Options{Dir: dir}, args...)
	var exit *exec.ExitError
	if err := c.Wait(time.Minute); err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", c, err)
	}
	return c.Stdout.String(), c.Stderr.String(), c.ExitCode()
}

// TestDocsShowTheVersionReport: configuration.md's `lavender version`
// example has the lines the binary prints, bar those the build may leave
// out.
func TestDocsShowTheVersionReport(t *testing.T) {
	t.Parallel()
	shown := strings.Split(testkit.BlockStartingWith(t, "docs/configuration.md", testkit.DocPages(t)["docs/configuration.md"], "lavender, version"), "\n")
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

// barkPage is docs/bark.md.
func barkPage(t *testing.T) string {
	t.Helper()
	return testkit.DocPages(t)["docs/bark.md"]
}

// TestDocsShowWhatBarkCheckPrints: bark.md's example file, checked, gives
// the lines the page shows; so does its encryption example.
func TestDocsShowWhatBarkCheckPrints(t *testing.T) {
	t.Parallel()
	page := barkPage(t)
	example := testkit.BlockStartingWith(t, "docs/bark.md", page, "# phone.bark.env: one URL template a line")
	shown := testkit.ShownOutput(testkit.BlockStartingWith(t, "docs/bark.md", page, "lavender bark check"), "lavender bark check")
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

	encrypted := testkit.BlockStartingWith(t, "docs/bark.md", page, "# phone.bark.env\nBARK_ENCRYPTION=")
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
	t.Parallel()
	readme := strings.Join(strings.Fields(testkit.DocPages(t)["README.md"]), " ")
	m := regexp.MustCompile("`(phone\\.bark\\.env:7: not configured: [^`]+)`").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README does not say what bark check prints for the untouched example")
	}
	example, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), ".bark.env.example"))
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
	t.Parallel()
	m := regexp.MustCompile(`lavender send --test +# the phone shows "([^"]+)"`).FindStringSubmatch(testkit.DocPages(t)["README.md"])
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
var shownFlagErrorRE = regexp.MustCompile("`(lavender: --([a-z][a-z0-9.-]*) [^`]*, not ([^`]+))`")

// TestDocsShowTheFlagErrors: an error a page quotes for a bad flag value,
// such as "lavender: --watchdog.threshold must be in (0, 1], not 1.5", is
// what serve prints for that value.
func TestDocsShowTheFlagErrors(t *testing.T) {
	t.Parallel()
	var checked int
	for path, page := range testkit.DocPages(t) {
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
