package testkit

import (
	"flag"
	"strconv"
)

// WaitBoundParallel lets n tests of the package run at once, in place of
// go test's default -parallel (GOMAXPROCS, two on a 2-core machine), unless
// -parallel was given. It is for a package whose parallel tests spend
// their time waiting on other processes, servers and poll intervals, not on
// the CPU: run two at a time, they leave the machine idle. Call it from
// TestMain, before m.Run.
func WaitBoundParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
		panic("testkit.WaitBoundParallel: " + err.Error())
	}
}
