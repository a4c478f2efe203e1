package barkbridge

import (
	"bytes"
	"html/template"
	"sync"
	"time"
)

// maxEvents is how many pushes and skipped alerts the status page lists.
const maxEvents = 20

// Event is one alert or watchdog reading as the status page lists it.
type Event struct {
	Time     time.Time `json:"time"`
	Source   string    `json:"source"`            // "webhook" or "watchdog"
	Status   string    `json:"status"`            // firing, resolved or unknown
	Subject  string    `json:"subject"`           // "swap 54%", or the alert name
	Message  string    `json:"message,omitempty"` // the text pushed
	Action   string    `json:"action"`            // pushed, failed, skipped or duplicate
	OK       int       `json:"ok"`
	Failed   int       `json:"failed"`
	Failures []string  `json:"failures,omitempty"` // "file:line failed: class"
}

// TargetStatus is a target's last push, named file:line only.
type TargetStatus struct {
	Target string    `json:"target"`
	Result string    `json:"result"` // "ok", "failed: timeout", or "" before the first push
	Time   time.Time `json:"time,omitzero"`
}

// BarkStatus is the bridge's part of the status page.
type BarkStatus struct {
	Targets []TargetStatus `json:"targets"`
	Events  []Event        `json:"events"` // newest first
}

// pushHistory remembers, bounded, what the status page shows.
type pushHistory struct {
	mu      sync.Mutex
	results map[string]TargetStatus // by target name; pruned to the loaded targets on reload
	events  []Event                 // ring of maxEvents, oldest at head once full
	head    int
}

func newPushHistory() *pushHistory {
	return &pushHistory{results: map[string]TargetStatus{}, events: make([]Event, 0, maxEvents)}
}

func (h *pushHistory) target(name, result string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.results[name] = TargetStatus{Target: name, Result: result, Time: at}
}

func (h *pushHistory) event(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) < maxEvents {
		h.events = append(h.events, e)
		return
	}
	h.events[h.head] = e
	h.head = (h.head + 1) % maxEvents
}

// keepOnly forgets the results of targets a reload removed, so the map
// stays bounded by the targets in use.
func (h *pushHistory) keepOnly(targets []Target) {
	live := make(map[string]bool, len(targets))
	for _, t := range targets {
		live[t.Name()] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range h.results {
		if !live[name] {
			delete(h.results, name)
		}
	}
}

func (h *pushHistory) snapshot(targets []Target) BarkStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := BarkStatus{Targets: make([]TargetStatus, 0, len(targets)), Events: make([]Event, 0, len(h.events))}
	for _, t := range targets {
		ts, ok := h.results[t.Name()]
		if !ok {
			ts = TargetStatus{Target: t.Name()}
		}
		s.Targets = append(s.Targets, ts)
	}
	for i := len(h.events) - 1; i >= 0; i-- {
		s.Events = append(s.Events, h.events[(h.head+i)%len(h.events)])
	}
	return s
}

// event describes d, once delivered, for the status page.
func (d *delivery) event(source, status, action string, at time.Time) Event {
	e := Event{Time: at, Source: source, Status: status, Subject: subject(d.subject), Message: d.message, Action: action, OK: d.ok, Failed: d.failed}
	for _, r := range d.results {
		if r.Err != nil {
			e.Failures = append(e.Failures, r.String())
		}
	}
	return e
}

// Status returns the targets' last results and the latest events.
func (b *Bridge) Status() BarkStatus { return b.history.snapshot(b.Targets()) }

// StatusName, StatusJSON and StatusHTML make the bridge a section of the
// exporter's status page without either package importing the other.
func (b *Bridge) StatusName() string { return "bark" }
func (b *Bridge) StatusJSON() any    { return b.Status() }

func (b *Bridge) StatusHTML() template.HTML {
	var buf bytes.Buffer
	if err := statusSectionTemplate.Execute(&buf, b.Status()); err != nil {
		return template.HTML("<section class=\"card\"><h2>Bark</h2><p class=\"error\">" +
			template.HTMLEscapeString(err.Error()) + "</p></section>")
	}
	return template.HTML(buf.String()) // produced by html/template: escaped
}

var statusSectionTemplate = template.Must(template.New("bark").Funcs(template.FuncMap{
	"clock": func(t time.Time) string { return t.Local().Format("15:04:05") },
}).Parse(`<section id="bark" class="card">
  <h2>Bark</h2>
  {{- if .Targets}}
  <table>
    <thead><tr><th>target</th><th>last push</th><th>at</th></tr></thead>
    <tbody>
    {{- range .Targets}}
    <tr><td><code>{{.Target}}</code></td><td>{{if not .Result}}<span class="muted">none yet</span>{{else if eq .Result "ok"}}<span class="badge ok">✓ ok</span>{{else}}<span class="badge failed">✗ {{.Result}}</span>{{end}}</td><td>{{if not .Time.IsZero}}{{clock .Time}}{{end}}</td></tr>
    {{- end}}
    </tbody>
  </table>
  {{- else}}
  <p class="error">no Bark targets: add a <code>*.bark.env</code> file and reload</p>
  {{- end}}
  <h2 style="margin-top:0.8rem">Last pushes and skipped alerts</h2>
  {{- if .Events}}
  <table id="bark-events">
    <thead><tr><th>at</th><th>what</th><th>result</th></tr></thead>
    <tbody>
    {{- range .Events}}
    <tr class="{{.Action}}"><td>{{clock .Time}}</td><td>{{.Subject}}{{if ne .Status "firing"}} ({{.Status}}){{end}} <span class="muted">{{.Source}}</span></td>
      <td>{{if or .OK .Failed}}{{if .Failed}}<span class="badge failed">sent ok={{.OK}} fail={{.Failed}}</span>{{else}}<span class="badge ok">sent ok={{.OK}}</span>{{end}}{{else}}<span class="muted">{{.Action}}</span>{{end}}{{range .Failures}}<br><span class="muted">{{.}}</span>{{end}}</td></tr>
    {{- end}}
    </tbody>
  </table>
  {{- else}}
  <p class="muted">nothing pushed yet</p>
  {{- end}}
</section>`))
