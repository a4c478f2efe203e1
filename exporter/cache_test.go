package exporter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// countingCollector emits one gauge whose value counts its collections.
type countingCollector struct{ n float64 }

var countingDesc = prometheus.NewDesc("test_collections", "Collections so far.", nil, nil)

func (c *countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- countingDesc }
func (c *countingCollector) Collect(ch chan<- prometheus.Metric) {
	c.n++
	ch <- prometheus.MustNewConstMetric(countingDesc, prometheus.GaugeValue, c.n)
}

func TestReplayingGatherer(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&countingCollector{})
	rg := NewReplayingGatherer(reg, time.Second).(*replayingGatherer)
	now := time.Unix(1000, 0)
	rg.now = func() time.Time { return now }

	for _, step := range []struct {
		after time.Duration
		want  string
	}{
		{0, "1"},                      // first scrape gathers
		{500 * time.Millisecond, "1"}, // within the TTL: replayed
		{499 * time.Millisecond, "1"}, // still within
		{1 * time.Millisecond, "2"},   // a full TTL since the gathering: fresh
		{10 * time.Second, "3"},       // long after: fresh
	} {
		now = now.Add(step.after)
		want := "# HELP test_collections Collections so far.\n# TYPE test_collections gauge\ntest_collections " + step.want + "\n"
		if err := testutil.GatherAndCompare(rg, strings.NewReader(want)); err != nil {
			t.Fatalf("after %s: %v", step.after, err)
		}
	}
}

// failingGatherer returns its families and its error.
type failingGatherer struct {
	families []*dto.MetricFamily
	err      error
	calls    int
}

func (g *failingGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.calls++
	return g.families, g.err
}

// An error is replayed with the families that came with it: the process
// collector reports an unreadable /proc/self file that way, and a scrape
// within the TTL must say so too.
func TestReplayingGathererReplaysTheError(t *testing.T) {
	inner := &failingGatherer{families: families("a_total"), err: errors.New("read /proc/self/stat: gone")}
	rg := NewReplayingGatherer(inner, time.Hour)
	for range 2 {
		mfs, err := rg.Gather()
		if err == nil || err.Error() != "read /proc/self/stat: gone" || len(mfs) != 1 {
			t.Fatalf("Gather = %d families, %v; want 1 and the error", len(mfs), err)
		}
	}
	if inner.calls != 1 {
		t.Errorf("inner gathered %d times within the TTL, want 1", inner.calls)
	}
}

func families(names ...string) []*dto.MetricFamily {
	var mfs []*dto.MetricFamily
	for _, n := range names {
		mfs = append(mfs, &dto.MetricFamily{Name: &n, Type: dto.MetricType_GAUGE.Enum(),
			Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: new(float64)}}}})
	}
	return mfs
}

func names(mfs []*dto.MetricFamily) string {
	var ns []string
	for _, mf := range mfs {
		ns = append(ns, mf.GetName())
	}
	return strings.Join(ns, " ")
}

func TestMergeGatherers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b    []string
		aErr    error
		want    string
		wantErr string
	}{
		{name: "interleaved", a: []string{"go_goroutines", "lavender_swap_used_bytes", "promhttp_metric_handler_requests_total"},
			b:    []string{"go_gc_duration_seconds", "lavender_build_info", "process_start_time_seconds"},
			want: "go_gc_duration_seconds go_goroutines lavender_build_info lavender_swap_used_bytes process_start_time_seconds promhttp_metric_handler_requests_total"},
		{name: "one empty", a: nil, b: []string{"b1", "b2"}, want: "b1 b2"},
		{name: "other empty", a: []string{"a1", "a2"}, b: nil, want: "a1 a2"},
		{name: "both empty", want: ""},
		{name: "a family both export is served once and is an error", a: []string{"a", "x", "z"}, b: []string{"b", "x"},
			want: "a b x z", wantErr: `metric family "x" is exported twice; the second is left out`},
		{name: "an error of one gatherer comes with both lists", a: []string{"a"}, b: []string{"b"}, aErr: errors.New("collector broke"),
			want: "a b", wantErr: "collector broke"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &failingGatherer{families: families(tc.a...), err: tc.aErr}
			b := &failingGatherer{families: families(tc.b...)}
			mfs, err := MergeGatherers(a, b).Gather()
			if got := names(mfs); got != tc.want {
				t.Errorf("families %q, want %q", got, tc.want)
			}
			if gotErr := errText(err); gotErr != tc.wantErr {
				t.Errorf("error %q, want %q", gotErr, tc.wantErr)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
