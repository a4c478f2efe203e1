package throttle

import (
	"strings"
	"testing"
	"time"
)

func TestReporter(t *testing.T) {
	now := time.Date(2026, 4, 24, 0, 0, 0, 0, time.UTC)
	r := &Reporter{Now: func() time.Time { return now }}
	var got []string
	step := func(d time.Duration) {
		now = now.Add(d)
		logIt, suppressed := r.Report()
		if logIt {
			got = append(got, now.Format("15:04:05")+"/"+strings.Repeat("x", int(suppressed)))
		}
	}
	step(0) // the first failure is always logged
	for range 100 {
		step(500 * time.Millisecond) // 50 s of failures: held back
	}
	step(10 * time.Second) // a minute after the first: logged, with the count
	step(time.Second)
	step(2 * time.Minute)
	want := []string{"00:00:00/", "00:01:00/" + strings.Repeat("x", 100), "00:03:01/x"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("reported %q, want %q", got, want)
	}
}
