package delivery

import (
	"sync"
	"time"

	"github.com/lavender-ml/lavender/internal/ring"
)

// MaxEvents is how many pushes and skipped alerts the status page lists.
const MaxEvents = 20

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
	events  *ring.Ring[Event]
}

func newPushHistory() *pushHistory {
	return &pushHistory{results: map[string]TargetStatus{}, events: ring.New[Event](MaxEvents)}
}

func (h *pushHistory) target(name, result string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.results[name] = TargetStatus{Target: name, Result: result, Time: at}
}

func (h *pushHistory) event(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events.Push(e)
}

// keepOnly forgets the results of targets a reload removed, so the map
// stays bounded by the targets in use.
func (h *pushHistory) keepOnly(targets []string) {
	live := make(map[string]bool, len(targets))
	for _, t := range targets {
		live[t] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range h.results {
		if !live[name] {
			delete(h.results, name)
		}
	}
}

func (h *pushHistory) snapshot(targets []string) BarkStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := BarkStatus{Targets: make([]TargetStatus, 0, len(targets)), Events: h.events.NewestFirst()}
	for _, t := range targets {
		ts, ok := h.results[t]
		if !ok {
			ts = TargetStatus{Target: t}
		}
		s.Targets = append(s.Targets, ts)
	}
	return s
}

// Event is the push as the history lists it.
func (d *Push) Event(source, status, action string, at time.Time) Event {
	e := Event{Time: at, Source: source, Status: status, Subject: Subject(d.Subject), Message: d.Text, Action: action, OK: d.OK, Failed: d.Failed}
	for _, r := range d.Results {
		if r.Err != nil {
			e.Failures = append(e.Failures, r.String())
		}
	}
	return e
}

// Status returns the targets' last results and the latest events: plain
// data, which the status page renders and serves as JSON.
func (b *Pipeline) Status() BarkStatus { return b.history.snapshot(b.Targets()) }
