package testkit

import (
	"flag"
	"strconv"
	"testing"
)

func TestWaitBoundParallel(t *testing.T) {
	limit := func() int {
		n, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := limit()
	t.Cleanup(func() { _ = flag.Set("test.parallel", strconv.Itoa(before)) })
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })

	WaitBoundParallel(before + 5)
	want := before + 5
	if given {
		want = before // -parallel on the command line wins
	}
	if got := limit(); got != want {
		t.Errorf("-parallel after WaitBoundParallel(%d) = %d, want %d (given on the command line: %v)", before+5, got, want, given)
	}
}
