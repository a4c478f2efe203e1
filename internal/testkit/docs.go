package testkit

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// RepoRoot is the top of the repository (where go.mod is), found upwards
// from the test's working directory, its package's directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root.once.Do(func() {
		dir, err := os.Getwd()
		for err == nil {
			if _, statErr := os.Stat(filepath.Join(dir, "go.mod")); statErr == nil {
				root.dir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
		root.err = err
	})
	if root.dir == "" {
		t.Fatalf("testkit: no go.mod above the working directory (%v)", root.err)
	}
	return root.dir
}

var root struct {
	once sync.Once
	dir  string
	err  error
}

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
