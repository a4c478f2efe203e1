// Package statuspage is lavender's status page: "/" for the phone that just
// buzzed, and the same data as JSON at StatusPath for scripts. It owns the
// page's HTML, CSS and every template, and reads only plain data: the
// phase server's snapshot, the run log, the watchdog's history and rule
// states, and the bridge's targets and pushes. No other package renders
// HTML, and nothing here waits on the phase server's table lock.
package statuspage

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sync"
	"time"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/diskguard"
	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/phaseserver"
	"github.com/lavender-ml/lavender/runlog"
	"github.com/lavender-ml/lavender/watchdog"
)

// StatusPath serves the status page's data as JSON.
const StatusPath = "/api/v1/status"

//go:embed status.html status.css
var files embed.FS

// History is the host's record the page draws: the newest reading and the
// kept samples over Window. *watchdog.History is one.
type History interface {
	Latest() (watchdog.Sample, error)
	Samples() []watchdog.Sample
	Window() time.Duration
}

// Config names the page's sources. Each is plain data read through a
// function, so the page holds no lock of anyone else's.
type Config struct {
	// Phases returns the run and its phases: the exporter's Snapshot,
	// which reads a published copy without the phase table's lock.
	// Required.
	Phases func() (*phaseapi.Run, []phaseapi.Phase)
	// RunLog returns the log of the run the phases belong to, nil before
	// the first run: the exporter's RunLog, which takes no lock either.
	RunLog func() *runlog.Log
	// History is swap and memory pressure now and over the last window;
	// nil: the page shows no reading.
	History History
	// Rules returns the watchdog's rule states (its State); nil when no
	// watchdog runs.
	Rules func() []watchdog.RuleState
	// Bark returns the bridge's targets and last pushes (its Status); nil
	// when no bridge runs.
	Bark func() delivery.BarkStatus
	// KernelLog says whether the kernel log is read; nil: the page says
	// nothing of it.
	KernelLog func() KernelLogStatus
	// ProcVisibility says whether procfs hides processes that lavender
	// judges, and how: the exporter's ProcVisibility. nil: the page says
	// nothing of it.
	ProcVisibility func() (hides bool, why string)
	// Disks returns the disk guard's last poll (its Latest); nil: the
	// page has no disk section. DiskMinFree is the floor in force
	// (--watchdog.disk-min-free), for marking a disk under it.
	Disks       func() diskguard.Snapshot
	DiskMinFree watchdog.MinFree
	// GPUs returns the last NVML pass (the gpu reader's Snapshot), and
	// GPUsOff why there is none ("built without cgo: GPU telemetry off");
	// both unset: the page has no GPU section.
	GPUs    func() gpu.Snapshot
	GPUsOff string

	// Threshold is the swap ratio shown in the warning colour and drawn
	// as the chart's line; default watchdog.DefaultThreshold.
	Threshold float64
	// PressureThreshold is the memory pressure (PSI some avg10, 0–1)
	// shown in the warning colour and drawn as the chart's second line;
	// default watchdog.DefaultPressureThreshold.
	PressureThreshold float64
	// StallAfter is how long a running phase may go without a heartbeat,
	// or while pinging without a new step, before the page marks it
	// stalled: --phase.stall-after, watchdog.DefaultStallAfter by default.
	// 0 marks no stalls, as 0 turns the stalled rule off.
	StallAfter time.Duration

	Links []string         // paths listed in the footer, e.g. "/metrics"
	Now   func() time.Time // default time.Now
}

// Page serves "/" (HTML) and StatusPath (JSON).
type Page struct {
	cfg Config
}

// New builds the page from cfg.
func New(cfg Config) (*Page, error) {
	if cfg.Phases == nil {
		return nil, fmt.Errorf("statuspage: no phase source")
	}
	if cfg.StallAfter < 0 {
		return nil, fmt.Errorf("statuspage: stall time must not be negative, not %s", cfg.StallAfter)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Threshold <= 0 {
		cfg.Threshold = watchdog.DefaultThreshold
	}
	if cfg.PressureThreshold <= 0 {
		cfg.PressureThreshold = watchdog.DefaultPressureThreshold
	}
	return &Page{cfg: cfg}, nil
}

// Register adds "/" and StatusPath to mux; other unknown paths get 404.
func (p *Page) Register(mux *http.ServeMux) {
	mux.Handle("/", onlyPath("/", phaseserver.AllowMethods(http.HandlerFunc(p.handlePage), http.MethodGet, http.MethodHead)))
	mux.Handle(StatusPath, phaseserver.AllowMethods(http.HandlerFunc(p.handleJSON), http.MethodGet, http.MethodHead))
}

// Status is the page's data; GET StatusPath returns it as JSON.
type Status struct {
	Time      time.Time      `json:"time"`
	Swap      *SwapSample    `json:"swap"` // null before the first reading, and when the last one failed
	SwapError string         `json:"swap_error,omitempty"`
	Threshold float64        `json:"threshold"`
	History   []SwapSample   `json:"history"`
	Run       *phaseapi.Run  `json:"run"`
	Phases    []Phase        `json:"phases"`
	RunLog    string         `json:"run_log"`
	Sections  map[string]any `json:"sections,omitempty"` // "bark": the bridge's status; "watchdog": its rules
	// Disks are the watched filesystems; absent where no disk guard runs.
	Disks []Disk `json:"disks,omitempty"`
	// GPUs are the GPUs of the last NVML pass, or why there are none;
	// absent where the command reads no GPU.
	GPUs *GPUs `json:"gpus,omitempty"`

	// PressureThreshold is the memory pressure line, 0–1.
	PressureThreshold float64 `json:"pressure_threshold"`
}

// SwapSample is one point of the swap history, as the JSON has always
// spelled it.
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

func swapSample(s watchdog.Sample) SwapSample {
	out := SwapSample{Time: s.Time, UsedRatio: s.Swap.Ratio, UsedBytes: s.Swap.UsedBytes, TotalBytes: s.Swap.TotalBytes}
	if s.Pressure.Available {
		some := s.Pressure.Some
		out.PressureSomeAvg10 = &some
	}
	return out
}

// RuleState is one watchdog rule as the JSON shows it.
type RuleState struct {
	Rule  watchdog.RuleName `json:"rule"`
	Armed bool              `json:"armed"`          // will push on the next crossing
	Since time.Time         `json:"since,omitzero"` // when the current incident began
	// Undelivered: its push reached no phone yet and is retried.
	Undelivered bool `json:"undelivered,omitempty"`
	// NotWatching says why the rule cannot fire on this host (its source,
	// the kernel log or NVML, is not read); "" while it can.
	NotWatching string `json:"not_watching,omitempty"`
}

// Snapshot gathers the page's data. It reads only memory and the run log
// (at most its cap), never procfs, and takes no lock of the exporter's.
func (p *Page) Snapshot() Status {
	s := Status{Time: p.cfg.Now(), Threshold: p.cfg.Threshold, PressureThreshold: p.cfg.PressureThreshold, Sections: map[string]any{}}
	if h := p.cfg.History; h != nil {
		latest, err := h.Latest()
		switch {
		case err != nil:
			s.SwapError = err.Error()
		case !latest.Time.IsZero():
			sample := swapSample(latest)
			s.Swap = &sample
		}
		samples := h.Samples()
		s.History = make([]SwapSample, len(samples))
		for i, x := range samples {
			s.History[i] = swapSample(x)
		}
	}
	var phases []phaseapi.Phase
	s.Run, phases = p.cfg.Phases()
	s.Phases = make([]Phase, len(phases))
	var resumed time.Time
	if s.Run != nil {
		resumed = s.Run.Resumed
	}
	for i, ph := range phases {
		s.Phases[i] = newPhase(ph, s.Time, resumed, p.cfg.StallAfter)
	}
	orderPhases(s.Phases)
	if p.cfg.RunLog != nil {
		if l := p.cfg.RunLog(); l != nil {
			if data, err := l.Read(); err == nil {
				s.RunLog = string(data)
			}
		}
	}
	if p.cfg.Bark != nil {
		s.Sections["bark"] = p.cfg.Bark()
	}
	if p.cfg.KernelLog != nil {
		s.Sections["kernel_log"] = p.cfg.KernelLog()
	}
	if p.cfg.ProcVisibility != nil {
		hides, why := p.cfg.ProcVisibility()
		s.Sections["procfs"] = ProcfsStatus{HidesProcesses: hides, Why: why}
	}
	if p.cfg.Disks != nil {
		s.Disks = newDisks(p.cfg.Disks(), p.cfg.DiskMinFree)
	}
	switch {
	case p.cfg.GPUs != nil:
		s.GPUs = ptr(newGPUs(p.cfg.GPUs(), ""))
	case p.cfg.GPUsOff != "":
		s.GPUs = ptr(newGPUs(gpu.Snapshot{}, p.cfg.GPUsOff))
	}
	if p.cfg.Rules != nil {
		kernelLogUnread := ""
		if k, ok := s.Sections["kernel_log"].(KernelLogStatus); ok && !k.Readable {
			kernelLogUnread = "the kernel log is not read"
		}
		rules := []RuleState{}
		for _, r := range p.cfg.Rules() {
			rules = append(rules, RuleState{Rule: r.Name, Armed: r.Armed, Since: r.Since, Undelivered: r.Undelivered,
				NotWatching: notWatching(r.Name, kernelLogUnread, p.cfg.GPUsOff)})
		}
		s.Sections["watchdog"] = rules
	}
	return s
}

// notWatching says why rule cannot fire on this host, "" if it can: the
// storage faults come from the kernel log alone, the Xids from the kernel
// log or NVML's events, the GPU telemetry rules from NVML. A rule shown
// armed beside a source that is not read would promise a push that cannot
// come.
func notWatching(rule watchdog.RuleName, kernelLogUnread, gpusOff string) string {
	switch rule {
	case watchdog.RuleDisk:
		return kernelLogUnread
	case watchdog.RuleGPU:
		if kernelLogUnread != "" && gpusOff != "" {
			return kernelLogUnread + ", and no GPU telemetry"
		}
	}
	if rule.FromNVML() && gpusOff != "" {
		return "no GPU telemetry"
	}
	return ""
}

func (p *Page) handleJSON(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, p.Snapshot())
}

func (p *Page) handlePage(w http.ResponseWriter, r *http.Request) {
	s := p.Snapshot()
	v := view{
		Status:  s,
		CSS:     pageCSS(),
		Links:   p.cfg.Links,
		High:    s.Swap != nil && s.Swap.TotalBytes > 0 && s.Swap.UsedRatio >= s.Threshold,
		Chart:   newChart(s.History, s.Threshold, s.PressureThreshold, s.Time, p.window()),
		HasBark: p.cfg.Bark != nil,
		MinFree: p.cfg.DiskMinFree,
	}
	v.PressureHigh = s.Swap != nil && s.Swap.PressureSomeAvg10 != nil && *s.Swap.PressureSomeAvg10 >= s.PressureThreshold
	if b, ok := s.Sections["bark"].(delivery.BarkStatus); ok {
		v.Bark = b
	}
	if pv, ok := s.Sections["procfs"].(ProcfsStatus); ok && pv.HidesProcesses {
		v.ProcfsHidesAny = &pv
	}
	if rules, ok := s.Sections["watchdog"].([]RuleState); ok {
		v.Rules = rules
	}
	if k, ok := s.Sections["kernel_log"].(KernelLogStatus); ok && !k.Readable {
		v.KernelLogBlind = &k
	}
	var buf bytes.Buffer
	if err := pageTemplate().Execute(&buf, v); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	_, _ = w.Write(buf.Bytes())
}

func (p *Page) window() time.Duration {
	if p.cfg.History != nil {
		return p.cfg.History.Window()
	}
	return watchdog.DefaultStep * watchdog.HistorySamples
}

// view is what the template reads.
type view struct {
	Status
	CSS          template.CSS
	Links        []string
	High         bool // swap at or above its threshold
	PressureHigh bool // pressure at or above its threshold
	Chart        chart
	HasBark      bool
	// KernelLogBlind is set when the kernel log is not read.
	KernelLogBlind *KernelLogStatus
	// ProcfsHidesAny is set when procfs hides processes lavender judges.
	ProcfsHidesAny *ProcfsStatus
	Bark           delivery.BarkStatus
	Rules          []RuleState
	MinFree        watchdog.MinFree // the disk floor in force
}

var pageCSS = sync.OnceValue(func() template.CSS {
	b, err := files.ReadFile("status.css")
	if err != nil {
		panic(err)
	}
	return template.CSS(b)
})

// onlyPath answers 404 for every path but path. A mux pattern ending in a
// slash ("/" above all) catches every path below it, and without this a
// typo such as POST /webhooks would get the 405 of the page at "/", which
// sends the user looking at the method instead of the path.
func onlyPath(path string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			writeJSON(w, http.StatusNotFound, errorResponse{Error: "no such path " + r.URL.Path})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// errorResponse is the API's error body, phaseapi.ErrorResponse.
type errorResponse = phaseapi.ErrorResponse

// writeJSON encodes v before the status goes out, so a value JSON cannot
// hold (a NaN that got past a parser) is a 500 that says so, never a 200
// with an empty body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	// The 404's body quotes the path asked for: no browser may take it
	// for HTML.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(errorResponse{Error: "status not encoded: " + err.Error()})
	}
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func ptr[T any](v T) *T { return &v }
