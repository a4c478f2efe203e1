package exporter

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StatusPath serves the status page's data as JSON.
const StatusPath = "/api/v1/status"

// DefaultPressureThreshold is the memory pressure (PSI some, 0–1) at which
// MemoryPressureHigh fires: psi-notify's and nohang's warning level.
const DefaultPressureThreshold = 0.10

//go:embed status.html status.css
var statusFiles embed.FS

var statusTemplate = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"percent": func(r float64) string { return strconv.Itoa(int(math.Round(r*100))) + "%" },
	"deref":   func(r *float64) float64 { return *r },
	"gib":     func(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<30)) },
	"age":     func(now, t time.Time) string { return humanDuration(now.Sub(t)) },
	"seconds": func(s float64) string { return humanDuration(time.Duration(s * float64(time.Second))) },
	"clock":   func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
}).ParseFS(statusFiles, "status.html"))

var statusCSS = func() template.CSS {
	b, err := statusFiles.ReadFile("status.css")
	if err != nil {
		panic(err)
	}
	return template.CSS(b)
}()

// A StatusSection is a part of the status page that another package owns
// and renders itself, such as the bridge's targets and pushes. Its HTML
// must escape everything user-supplied (render it with html/template).
type StatusSection interface {
	StatusName() string // key in the JSON, e.g. "bark"
	StatusHTML() template.HTML
	StatusJSON() any
}

// SwapSample is one point of the page's swap chart.
type SwapSample struct {
	Time       time.Time `json:"time"`
	UsedRatio  float64   `json:"used_ratio"`
	UsedBytes  uint64    `json:"used_bytes"`
	TotalBytes uint64    `json:"total_bytes"`
	// PressureSomeAvg10 is the share of the last 10 s in which a task
	// waited for memory (PSI "some avg10"), 0–1; nil on a kernel without
	// PSI or when pressure/memory could not be read.
	PressureSomeAvg10 *float64 `json:"pressure_some_avg10,omitempty"`
}

// SwapHistory is what the page reads of the readings the watchdog keeps
// (cmd adapts the watchdog's History to it). The page never reads procfs.
type SwapHistory interface {
	// Latest is the newest reading, or the newest attempt's error; a
	// zero Time before the first reading.
	Latest() (SwapSample, error)
	// Samples are the kept readings, oldest first.
	Samples() []SwapSample
	// Window is how far back the kept readings reach.
	Window() time.Duration
}

// defaultChartWindow is the chart's width in time without a history.
const defaultChartWindow = time.Hour

// StatusConfig configures the status page.
type StatusConfig struct {
	History   SwapHistory      // swap now and the chart; nil: none
	Threshold float64          // swap ratio shown in the warning colour, and the chart's line
	Sections  []StatusSection  // e.g. the bridge
	Links     []string         // paths listed in the footer, e.g. "/metrics"
	Now       func() time.Time // default time.Now

	// PressureThreshold is the memory pressure (PSI some avg10, 0–1) shown
	// in the warning colour and drawn as the chart's second line; default
	// DefaultPressureThreshold.
	PressureThreshold float64
}

// StatusPage serves "/" (HTML) and StatusPath (JSON): swap now and over
// the last hour, the phases, other sections, and the current run log.
type StatusPage struct {
	exp *Exporter
	cfg StatusConfig
}

// NewStatusPage builds the status page for e.
func NewStatusPage(e *Exporter, cfg StatusConfig) *StatusPage {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Threshold <= 0 {
		cfg.Threshold = 0.5
	}
	if cfg.PressureThreshold <= 0 {
		cfg.PressureThreshold = DefaultPressureThreshold
	}
	return &StatusPage{exp: e, cfg: cfg}
}

// Register adds "/" and StatusPath to mux; other unknown paths get 404.
func (p *StatusPage) Register(mux *http.ServeMux) {
	mux.Handle("/", onlyPath("/", allow(http.HandlerFunc(p.handlePage), http.MethodGet, http.MethodHead)))
	mux.Handle(StatusPath, allow(http.HandlerFunc(p.handleJSON), http.MethodGet, http.MethodHead))
}

// Status is the page's data; GET /api/v1/status returns it as JSON.
type Status struct {
	Time      time.Time      `json:"time"`
	Swap      *SwapSample    `json:"swap"` // null when the last read failed
	SwapError string         `json:"swap_error,omitempty"`
	Threshold float64        `json:"threshold"`
	History   []SwapSample   `json:"history"`
	Run       *Run           `json:"run"`
	Phases    []Phase        `json:"phases"`
	RunLog    string         `json:"run_log"`
	Sections  map[string]any `json:"sections,omitempty"`

	// PressureThreshold is the memory pressure line, 0–1.
	PressureThreshold float64 `json:"pressure_threshold"`
}

// Snapshot gathers the page's data. It reads only memory and the run log
// (at most its cap), never procfs: swap comes from the history.
func (p *StatusPage) Snapshot() Status {
	s := Status{Time: p.cfg.Now(), Threshold: p.cfg.Threshold, Sections: map[string]any{}}
	s.PressureThreshold = p.cfg.PressureThreshold
	if h := p.cfg.History; h != nil {
		latest, err := h.Latest()
		switch {
		case err != nil:
			s.SwapError = err.Error()
		case !latest.Time.IsZero():
			s.Swap = &latest
		}
		s.History = h.Samples()
	}
	s.Run, s.Phases = p.exp.Snapshot()
	if log, err := p.exp.runLog(); err == nil {
		s.RunLog = string(log)
	}
	for _, sec := range p.cfg.Sections {
		s.Sections[sec.StatusName()] = sec.StatusJSON()
	}
	return s
}

func (p *StatusPage) handleJSON(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, p.Snapshot())
}

func (p *StatusPage) handlePage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	s := p.Snapshot()
	view := pageView{
		Status: s,
		CSS:    statusCSS,
		Links:  p.cfg.Links,
		High:   s.Swap != nil && s.Swap.TotalBytes > 0 && s.Swap.UsedRatio >= s.Threshold,
		Chart:  newChart(s.History, s.Threshold, s.PressureThreshold, s.Time, p.cfg.History),
	}
	view.PressureHigh = s.Swap != nil && s.Swap.PressureSomeAvg10 != nil && *s.Swap.PressureSomeAvg10 >= s.PressureThreshold
	for _, sec := range p.cfg.Sections {
		view.Sections = append(view.Sections, sec.StatusHTML())
	}
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, view); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	_, _ = w.Write(buf.Bytes())
}

type pageView struct {
	Status
	CSS      template.CSS
	Links    []string
	High     bool
	Chart    chart
	Sections []template.HTML

	PressureHigh bool // pressure at or above its threshold
}

// chart is the swap history as an inline SVG: x is the last window, y the
// used ratio from 0 to 1. Memory pressure shares the 0–1 axis, so a page
// shows at a glance whether tasks stalled before swap filled.
type chart struct {
	Width, Height      float64
	Points             string  // swap polyline points, "x,y x,y …"
	PressurePoints     string  // pressure polyline points; "" without PSI
	ThresholdY         float64 // y of the swap threshold line
	PressureThresholdY float64 // y of the pressure threshold line
	Samples            int
	Window             string
}

func newChart(samples []SwapSample, threshold, pressureThreshold float64, now time.Time, h SwapHistory) chart {
	c := chart{Width: 600, Height: 150, Samples: len(samples)}
	window := defaultChartWindow
	if h != nil {
		window = h.Window()
	}
	c.Window = humanDuration(window)
	c.ThresholdY = c.y(threshold)
	c.PressureThresholdY = c.y(pressureThreshold)
	start := now.Add(-window)
	var pts, pressure []string
	for _, s := range samples {
		x := strconv.FormatFloat(min(max(float64(s.Time.Sub(start))/float64(window)*c.Width, 0), c.Width), 'f', 1, 64)
		pts = append(pts, x+","+strconv.FormatFloat(c.y(s.UsedRatio), 'f', 1, 64))
		if s.PressureSomeAvg10 != nil {
			pressure = append(pressure, x+","+strconv.FormatFloat(c.y(*s.PressureSomeAvg10), 'f', 1, 64))
		}
	}
	c.Points = strings.Join(pts, " ")
	c.PressurePoints = strings.Join(pressure, " ")
	return c
}

func (c chart) y(ratio float64) float64 { return c.Height * (1 - min(max(ratio, 0), 1)) }

// runLog reads the log of the run the exporter is on.
func (e *Exporter) runLog() ([]byte, error) {
	e.mu.Lock()
	l := e.log
	e.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("exporter: no run yet")
	}
	return l.Read()
}

// humanDuration is "3h 05m", "4m 10s" or "12s": enough for a glance.
func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}
