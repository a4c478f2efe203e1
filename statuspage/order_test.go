package statuspage

import (
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/watchdog"
)

// TestPageLeadsWithTheRun: the phases come first on the page, before
// swap and the disks, and the running ones first among them (a stalled one
// on top), then the ended ones, the latest first. A phase that ended ok
// with a NaN loss says so beside its ✓; a running one shows its loss.
func TestPageLeadsWithTheRun(t *testing.T) {
	r := newRig(t)
	if _, err := r.exp.StartRun("", ""); err != nil {
		t.Fatal(err)
	}
	loss := func(v float64) *phaseapi.Loss { l := phaseapi.Loss(v); return &l }
	apply := func(req phaseapi.HeartbeatRequest) {
		t.Helper()
		if _, err := r.exp.Apply(req); err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	apply(phaseapi.HeartbeatRequest{Phase: "Building model", Event: phaseapi.EventStart})
	apply(phaseapi.HeartbeatRequest{Phase: "Hung", Event: phaseapi.EventStart})
	r.clock.Advance(time.Minute)
	apply(phaseapi.HeartbeatRequest{Phase: "Building model", Event: phaseapi.EventEnd})
	apply(phaseapi.HeartbeatRequest{Phase: "Finetune", Event: phaseapi.EventStart, Loss: loss(2.5)})
	r.clock.Advance(time.Minute)
	apply(phaseapi.HeartbeatRequest{Phase: "Finetune", Event: phaseapi.EventEnd, Loss: loss(math.NaN())})
	r.clock.Advance(watchdog.DefaultStallAfter)
	apply(phaseapi.HeartbeatRequest{Phase: "Train", Event: phaseapi.EventStart, Loss: loss(0.4321987)})
	for range 3 {
		r.record(swap54(), 10*time.Second)
	}

	page := r.html()
	if p, s := strings.Index(page, `<section id="phases"`), strings.Index(page, `<section id="swap"`); p < 0 || s < 0 || p > s {
		t.Errorf("the phases section (at %d) does not come before swap (at %d)", p, s)
	}
	var order []string
	for _, m := range regexp.MustCompile(`<td class="name">(.*?)</td>`).FindAllStringSubmatch(page, -1) {
		order = append(order, m[1])
	}
	if want := []string{"Hung", "Train", "Finetune", "Building model"}; strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("phases in the order %q, want %q", order, want)
	}
	rows := phaseRows(t, page)
	if row := rows["Finetune"]; !strings.Contains(row, "✓ ok") || !strings.Contains(row, `<span class="badge diverged">⚠ loss NaN</span>`) {
		t.Errorf("an ok end with a NaN loss:\n%s", row)
	}
	if row := rows["Train"]; !strings.Contains(row, `<span class="loss muted">loss 0.4322</span>`) || strings.Contains(row, "diverged") {
		t.Errorf("a running phase's loss:\n%s", row)
	}
	if strings.Contains(rows["Building model"], "loss") {
		t.Errorf("a phase without a loss shows one:\n%s", rows["Building model"])
	}
	// Three samples 10 s apart: the chart spans their 30 s, not an hour.
	if !strings.Contains(page, "last 30s (3 samples)") {
		t.Errorf("the chart's caption does not say it spans the 30s of history:\n%s", page[strings.Index(page, "<figcaption"):])
	}
}
