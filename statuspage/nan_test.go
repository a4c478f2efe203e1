package statuspage

import (
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestStatusJSONNeverEmpty: a value JSON cannot hold (NaN) used to give
// 200 with an empty body, since the status went out before encoding
// failed. Now it is a 500 whose body says what failed.
func TestStatusJSONNeverEmpty(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, 200, SwapSample{UsedRatio: math.NaN()})
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"error":"status not encoded: json: unsupported value: NaN"`) {
		t.Errorf("NaN in the status: %d %q, want 500 saying why", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	writeJSON(rec, 200, SwapSample{UsedRatio: 0.5})
	if rec.Code != 200 || !strings.HasSuffix(rec.Body.String(), "}\n") || !strings.Contains(rec.Body.String(), `"used_ratio":0.5`) {
		t.Errorf("a good status: %d %q", rec.Code, rec.Body)
	}
}

// TestChartSkipsNaN: a NaN sample is left out of the chart's points
// instead of reaching the SVG as "x,NaN", which drops the whole line.
func TestChartSkipsNaN(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	nan, half := math.NaN(), 0.5
	samples := []SwapSample{
		{Time: now.Add(-2 * time.Minute), UsedRatio: 0.5, PressureSomeAvg10: &half},
		{Time: now.Add(-time.Minute), UsedRatio: nan, PressureSomeAvg10: &nan},
		{Time: now, UsedRatio: 0.25, PressureSomeAvg10: &half},
	}
	c := newChart(samples, 0.8, 0.1, now, time.Hour)
	for name, pts := range map[string]string{"swap": c.Points, "pressure": c.PressurePoints} {
		if strings.Contains(pts, "NaN") || len(strings.Fields(pts)) != 2 {
			t.Errorf("%s points %q, want the two finite samples only", name, pts)
		}
	}
}
