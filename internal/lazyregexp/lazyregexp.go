// Package lazyregexp is a regular expression compiled when it is first
// used, as Go's own internal/lazyregexp. Every lavender command loads
// every package, and compiling the kernel log's, ntfy's and the phase
// server's patterns as they loaded took a third of what a short command
// (phase ping, runlog, version) costs; only the commands that read a
// kernel log or a target file ever use them.
package lazyregexp

import (
	"os"
	"regexp"
	"strings"
	"sync"
)

// Regexp is a regexp.Regexp compiled on first use. Its zero value is not
// usable; New makes one.
type Regexp struct {
	expr string
	once sync.Once
	rx   *regexp.Regexp
}

// New returns expr, to be compiled on first use; a bad expr panics then,
// as regexp.MustCompile would. Under go test it is compiled at once, so
// that a bad pattern fails its package's tests even if no test uses it.
func New(expr string) *Regexp {
	r := &Regexp{expr: expr}
	if inTest {
		r.re()
	}
	return r
}

var inTest = len(os.Args) > 0 && strings.HasSuffix(strings.TrimSuffix(os.Args[0], ".exe"), ".test")

func (r *Regexp) re() *regexp.Regexp {
	r.once.Do(func() { r.rx = regexp.MustCompile(r.expr) })
	return r.rx
}

// FindStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// MatchString is regexp.Regexp's.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// ReplaceAllString is regexp.Regexp's.
func (r *Regexp) ReplaceAllString(src, repl string) string { return r.re().ReplaceAllString(src, repl) }

// String is the source text of the expression.
func (r *Regexp) String() string { return r.expr }
