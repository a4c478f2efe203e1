package lazyregexp

import (
	"regexp"
	"slices"
	"sync"
	"testing"
)

func TestCompiledOnFirstUseOnly(t *testing.T) {
	// Built as New builds it outside a test binary.
	r := &Regexp{expr: `^dm-(\d+)$`}
	if r.rx != nil {
		t.Fatal("compiled before any use")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if !r.MatchString("dm-4") {
				t.Error(`MatchString("dm-4") = false`)
			}
		})
	}
	wg.Wait()
	first := r.rx
	if first == nil {
		t.Fatal("not compiled after use")
	}
	r.MatchString("dm-5")
	if r.rx != first {
		t.Error("compiled again on a later use")
	}
}

func TestSameAnswersAsRegexp(t *testing.T) {
	const expr = `(?i)\bSIG(KILL|SEGV)\b`
	lazy, eager := New(expr), regexp.MustCompile(expr)
	for _, s := range []string{"killed by SIGKILL", "sigsegv at 0x0", "SIGKILLED", ""} {
		if got, want := lazy.MatchString(s), eager.MatchString(s); got != want {
			t.Errorf("MatchString(%q) = %v, regexp says %v", s, got, want)
		}
		if got, want := lazy.FindStringSubmatch(s), eager.FindStringSubmatch(s); !slices.Equal(got, want) {
			t.Errorf("FindStringSubmatch(%q) = %q, regexp says %q", s, got, want)
		}
		if got, want := lazy.ReplaceAllString(s, "<$1>"), eager.ReplaceAllString(s, "<$1>"); got != want {
			t.Errorf("ReplaceAllString(%q) = %q, regexp says %q", s, got, want)
		}
	}
	if lazy.String() != expr {
		t.Errorf("String() = %q, want %q", lazy.String(), expr)
	}
}

func TestBadPatternFailsInTests(t *testing.T) {
	if !inTest {
		t.Fatal("a test binary is not seen as one: bad patterns would only fail at first use")
	}
	defer func() {
		if recover() == nil {
			t.Error("New of a bad pattern did not panic in a test binary")
		}
	}()
	New(`(unclosed`)
}
