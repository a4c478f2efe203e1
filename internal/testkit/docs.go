package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// RepoRoot is the top of the repository (where go.mod is); see
// moduleRoot.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := moduleRoot()
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return dir
}

// moduleRoot is the top of the repository, found upwards from the working
// directory (a test's is its package's directory): where the docs pages
// are read and where the lavender binary is built.
var moduleRoot = sync.OnceValues(func() (string, error) {
	start, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := start; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s: the tests do not run inside the lavender module", start)
		}
	}
})

// DocPages are the pages a user reads, by path from the repository's top:
// README.md, CONTRIBUTING.md, docs/*.md and the deploy files' READMEs.
func DocPages(t testing.TB) map[string]string {
	t.Helper()
	top := RepoRoot(t)
	paths, err := filepath.Glob(filepath.Join(top, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := filepath.Glob(filepath.Join(top, "deploy", "*", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append(append(paths, deploy...), filepath.Join(top, "README.md"), filepath.Join(top, "CONTRIBUTING.md"))
	pages := map[string]string{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(top, p)
		pages[filepath.ToSlash(rel)] = string(data)
	}
	return pages
}

var fenceBodyRE = regexp.MustCompile("(?ms)^[ \t]*```[a-z]*\n(.*?)^[ \t]*```")

// CodeBlocks are the fenced blocks of a page, each without its fences and
// with the indentation of its first line taken off every line.
func CodeBlocks(page string) []string {
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

// BlockStartingWith is the one code block of page (named name in the
// failure) whose first line starts with prefix.
func BlockStartingWith(t testing.TB, name, page, prefix string) string {
	t.Helper()
	var found []string
	for _, b := range CodeBlocks(page) {
		if strings.HasPrefix(b, prefix) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d code blocks start with %q, want 1", name, len(found), prefix)
	}
	return found[0]
}

// ShownOutput is what a page shows a command print: the "# " lines that
// follow the line running it in a code block.
func ShownOutput(block, command string) []string {
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
