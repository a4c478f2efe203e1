package testkit

import (
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape, parsed with expfmt: families by name.
type Metrics map[string]*dto.MetricFamily

// Labels selects series: every pair given must match; labels not named
// may have any value.
type Labels map[string]string

// ParseMetrics parses the Prometheus text exposition format.
func ParseMetrics(text string) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("testkit: parse metrics: %w", err)
	}
	return Metrics(mfs), nil
}

// FetchMetrics scrapes url (a /metrics URL) with client (nil: a plain
// client with a 30 s timeout) in the text format. user "" sends no
// credentials.
func FetchMetrics(client *http.Client, url, user, password string) (Metrics, error) {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("testkit: scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("testkit: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("testkit: scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("testkit: scrape %s: HTTP %d: %.200s", url, resp.StatusCode, body)
	}
	return ParseMetrics(string(body))
}

// Scrape is FetchMetrics without credentials that fails the test on error.
func Scrape(t testing.TB, client *http.Client, url string) Metrics {
	t.Helper()
	m, err := FetchMetrics(client, url, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// GatherMetrics reads a registry directly, for tests that hold one.
func GatherMetrics(g prometheus.Gatherer) (Metrics, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("testkit: gather: %w", err)
	}
	m := Metrics{}
	for _, mf := range mfs {
		m[mf.GetName()] = mf
	}
	return m, nil
}

// Value is the value of the one series of name whose labels include all
// of labels. It is an error when the metric is absent, when no series
// matches (the error lists the series there are) or when several do. A
// histogram or summary is read through its sample names: name_count,
// name_sum, or name_bucket with an "le" label.
func (m Metrics) Value(name string, labels Labels) (float64, error) {
	vals, err := m.values(name, labels)
	if err != nil {
		return 0, err
	}
	switch len(vals) {
	case 0:
		return 0, fmt.Errorf("testkit: no series %s; there are: %s", seriesName(name, labels), strings.Join(m.Series(name), ", "))
	case 1:
		return vals[0], nil
	}
	return 0, fmt.Errorf("testkit: %d series match %s; name more labels: %s", len(vals), seriesName(name, labels), strings.Join(m.Series(name), ", "))
}

// Sum adds the series of name whose labels include all of labels: 0 when
// the metric exists but no series matches, an error when it is absent.
func (m Metrics) Sum(name string, labels Labels) (float64, error) {
	vals, err := m.values(name, labels)
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	return sum, err
}

// Has says whether the metric is there at all.
func (m Metrics) Has(name string) bool {
	_, _, err := m.family(name)
	return err == nil
}

// Series lists the series of name as the text format writes them, sorted:
// `x_total{code="200"}`.
func (m Metrics) Series(name string) []string {
	mf, sample, err := m.family(name)
	if err != nil {
		return nil
	}
	var out []string
	for _, metric := range mf.GetMetric() {
		ls := labelsOf(metric)
		if sample == "_bucket" {
			for _, b := range metric.GetHistogram().GetBucket() {
				ls["le"] = fmt.Sprint(b.GetUpperBound())
				out = append(out, seriesName(name, ls))
			}
			continue
		}
		out = append(out, seriesName(name, ls))
	}
	slices.Sort(out)
	return out
}

// family finds name's family; sample is "" for the family itself, or the
// histogram or summary sample suffix asked for.
func (m Metrics) family(name string) (*dto.MetricFamily, string, error) {
	if mf, ok := m[name]; ok {
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM, dto.MetricType_SUMMARY:
			return nil, "", fmt.Errorf("testkit: %s is a %s: ask for %s_count or %s_sum", name, strings.ToLower(mf.GetType().String()), name, name)
		}
		return mf, "", nil
	}
	for _, suffix := range []string{"_count", "_sum", "_bucket"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		mf, ok := m[base]
		if !ok {
			continue
		}
		switch t := mf.GetType(); {
		case t == dto.MetricType_HISTOGRAM || t == dto.MetricType_GAUGE_HISTOGRAM:
			return mf, suffix, nil
		case t == dto.MetricType_SUMMARY && suffix != "_bucket":
			return mf, suffix, nil
		}
	}
	return nil, "", fmt.Errorf("testkit: no metric %s in the scrape", name)
}

func (m Metrics) values(name string, labels Labels) ([]float64, error) {
	mf, sample, err := m.family(name)
	if err != nil {
		return nil, err
	}
	var le float64
	if sample == "_bucket" {
		s, ok := labels["le"]
		if !ok {
			return nil, fmt.Errorf("testkit: %s needs an \"le\" label", name)
		}
		if _, err := fmt.Sscan(s, &le); err != nil {
			return nil, fmt.Errorf("testkit: %s: le=%q: %w", name, s, err)
		}
	}
	var vals []float64
	for _, metric := range mf.GetMetric() {
		if !matches(metric, labels, sample == "_bucket") {
			continue
		}
		switch sample {
		case "":
			vals = append(vals, plainValue(metric))
		case "_count":
			if h := metric.GetHistogram(); h != nil {
				vals = append(vals, float64(h.GetSampleCount()))
			} else {
				vals = append(vals, float64(metric.GetSummary().GetSampleCount()))
			}
		case "_sum":
			if h := metric.GetHistogram(); h != nil {
				vals = append(vals, h.GetSampleSum())
			} else {
				vals = append(vals, metric.GetSummary().GetSampleSum())
			}
		case "_bucket":
			for _, b := range metric.GetHistogram().GetBucket() {
				if b.GetUpperBound() == le || math.IsInf(le, 1) && math.IsInf(b.GetUpperBound(), 1) {
					vals = append(vals, float64(b.GetCumulativeCount()))
				}
			}
		}
	}
	return vals, nil
}

func labelsOf(metric *dto.Metric) Labels {
	ls := Labels{}
	for _, lp := range metric.GetLabel() {
		ls[lp.GetName()] = lp.GetValue()
	}
	return ls
}

func matches(metric *dto.Metric, want Labels, skipLE bool) bool {
	have := labelsOf(metric)
	for k, v := range want {
		if k == "le" && skipLE {
			continue
		}
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func plainValue(metric *dto.Metric) float64 {
	switch {
	case metric.Counter != nil:
		return metric.GetCounter().GetValue()
	case metric.Gauge != nil:
		return metric.GetGauge().GetValue()
	default:
		return metric.GetUntyped().GetValue()
	}
}

func seriesName(name string, labels Labels) string {
	if len(labels) == 0 {
		return name
	}
	keys := slices.Sorted(maps.Keys(labels))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, labels[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// MustValue is Value that fails the test on error.
func (m Metrics) MustValue(t testing.TB, name string, labels Labels) float64 {
	t.Helper()
	v, err := m.Value(name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
