package webhook

import (
	"slices"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/ntfytest"

	"github.com/prometheus/alertmanager/template"
)

// TestWebhookPushesToNtfyToo: an Alertmanager alert reaches an ntfy target
// beside a Bark one with the same words, the alert's tags, and the
// incident's id as its sequence id; its resolution replaces it (the same
// sequence id) and is tagged as one.
func TestWebhookPushesToNtfyToo(t *testing.T) {
	bark, ntfy := barktest.New(t, "KEY"), ntfytest.New(t)
	f := newFixture(t, map[string]string{
		"phone.bark.env": bark.Template("KEY"),
		"phone.ntfy.env": ntfy.TopicURL(ntfytest.Topic) + " phone=alice\n",
	}, func(c *fixtureConfig) { c.SendResolved = true })
	for _, file := range []string{"firing_swap_54.json", "resolved_swap.json"} {
		if code, answer := f.post(readTestdata(t, file)); code != 200 {
			t.Fatalf("%s: %d %q", file, code, answer)
		}
	}
	b, n := bark.Pushes(), ntfy.Publishes()
	if len(b) != 2 || len(n) != 2 {
		t.Fatalf("%d Bark pushes and %d ntfy publishes, want two each", len(b), len(n))
	}
	for i, want := range [][]string{{"warning", "SwapUsageHigh"}, {"white_check_mark", "SwapUsageHigh"}} {
		if b[i].Body != n[i].Message {
			t.Errorf("push %d: Bark %q, ntfy %q", i, b[i].Body, n[i].Message)
		}
		if !slices.Equal(n[i].Tags, want) || n[i].Priority != 2 {
			t.Errorf("push %d: ntfy tags %q priority %d, want %q and 2 (passive)", i, n[i].Tags, n[i].Priority, want)
		}
		if n[i].SequenceID == "" || n[i].SequenceID != b[0].ID {
			t.Errorf("push %d: sequence id %q, want the incident's %q", i, n[i].SequenceID, b[0].ID)
		}
	}
	if lines := f.barkLines(); len(lines) != 2 || lines[0] != "BARK swap 54% sent ok=2 fail=0" {
		t.Errorf("run log %q: one line per push, counting both channels", lines)
	}
}

// TestStormBudgetIsPerPhone: with storm control at one push a minute, a
// Bark and an ntfy target named as one phone share the budget: the second
// alert is held for both; a target of another phone still gets it.
func TestStormBudgetIsPerPhone(t *testing.T) {
	bark, ntfy, other := barktest.New(t, "KEY"), ntfytest.New(t), ntfytest.New(t)
	clock := newTestClock()
	f := newFixture(t, map[string]string{
		"alice.bark.env": "PHONE=alice\n" + bark.Template("KEY"),
		"alice.ntfy.env": ntfy.TopicURL(ntfytest.Topic) + " phone=alice\n",
		"bob.ntfy.env":   other.TopicURL(ntfytest.Topic) + "\n",
	}, func(c *fixtureConfig) { c.Now, c.MaxPerMinute = clock.Now, 1 })
	if _, answer := f.post(webhookBody(t, stormAlert(0))); answer != "alerts=1 pushed=1 failed=0 skipped=0 duplicate=0\n" {
		t.Fatalf("first alert: %q", answer)
	}
	// Each phone's one push of the minute is spent: alice's two targets
	// counted once, bob's own. The second alert is held for both phones,
	// and the minute's summary goes to every target of each.
	_, answer := f.post(webhookBody(t, stormAlert(1)))
	if bark.Count() != 1 || ntfy.Count() != 1 || other.Count() != 1 {
		t.Fatalf("pushes Bark %d, alice's ntfy %d, bob's ntfy %d, want one each; answer %q", bark.Count(), ntfy.Count(), other.Count(), answer)
	}
	clock.Advance(61 * time.Second)
	f.bridge.SendDue(t.Context(), clock.Now())
	bp, np, op := bark.Pushes(), ntfy.Publishes(), other.Publishes()
	if len(bp) != 2 || len(np) != 2 || len(op) != 2 {
		t.Fatalf("after the minute: Bark %d, alice's ntfy %d, bob's ntfy %d pushes, want the summary to each", len(bp), len(np), len(op))
	}
	if bp[1].Body != np[1].Message || bp[1].Body != "[lavender-2] 1 more alert in the last minute: SwapUsageHigh ×1" {
		t.Errorf("alice's summary: Bark %q, ntfy %q", bp[1].Body, np[1].Message)
	}
}

// TestGPUTelemetryAlertsAreWordedAsServe: GPULost and the row-remap alerts
// of alerts.yml push serve's words from the collector's labels; labels the
// collector never writes fall back to the alert's summary; each is tagged
// as serve's push of the same kind.
func TestGPUTelemetryAlertsAreWordedAsServe(t *testing.T) {
	f := newFixture(t, nil, nil)
	for _, tc := range []struct {
		name   string
		labels template.KV
		body   string
		tag    string
	}{
		{"GPULost", template.KV{"gpu": "5", "pci_bus_id": "0000:68:00"}, "[lavender-2] GPU 5 (0000:68:00) lost: fallen off the bus — reboot the host", "rotating_light"},
		{"GPURowRemapFailed", template.KV{"gpu": "2", "pci_bus_id": "0000:38:00"}, "[lavender-2] GPU 2 (0000:38:00): a memory row remap failed — replace the GPU", "wrench"},
		{"GPULost", template.KV{"gpu": "x", "pci_bus_id": "0000:68:00"}, "[lavender-2] GPULost: GPU x is lost", "rotating_light"},
		{"GPUHung", template.KV{"gpu": "0", "pci_bus_id": "0000:18:00"}, "[lavender-2] GPUHung: GPU x is lost", "hourglass"},
	} {
		labels := template.KV{"alertname": tc.name, "instance": "gpu-3:9877"}
		for k, v := range tc.labels {
			labels[k] = v
		}
		d := f.hook.planAlert(template.Alert{Status: "firing", Labels: labels, Annotations: template.KV{"summary": "GPU x is lost"}})
		if d == nil || d.Text != tc.body {
			t.Errorf("%s %v: pushes %+v, want %q", tc.name, tc.labels, d, tc.body)
			continue
		}
		if got := tags(tc.name, false); got[0] != tc.tag {
			t.Errorf("%s: tags %q, want %q first", tc.name, got, tc.tag)
		}
	}
}
