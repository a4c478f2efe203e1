package webhook

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/pushtext"

	"github.com/prometheus/alertmanager/template"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

const bytesPerGiB = 1 << 30

func TestSwapFromAnnotations(t *testing.T) {
	tests := []struct {
		ann  template.KV
		want string // "" = no usable ratio
	}{
		{template.KV{"swap_used_ratio": "0.54", "swap_used_bytes": "17501991731", "swap_total_bytes": "3.4359738368e+10"}, "swap 54% full (16.3/32.0 GB)"},
		{template.KV{"swap_used_ratio": " 0.54 "}, "swap 54% full"},
		{template.KV{"swap_used_ratio": "54%"}, "swap 54% full"},
		{template.KV{"swap_used_bytes": "1073741824", "swap_total_bytes": "4294967296"}, "swap 25% full (1.0/4.0 GB)"},
		{template.KV{"swap_used_ratio": "0.54", "swap_used_bytes": "-1", "swap_total_bytes": "100"}, "swap 54% full"},
		{template.KV{"swap_used_ratio": "0.54", "swap_used_bytes": "1", "swap_total_bytes": "0"}, "swap 54% full"},
		{template.KV{"swap_used_ratio": "0.54", "swap_used_bytes": "NaN", "swap_total_bytes": "+Inf"}, "swap 54% full"},
		{template.KV{"swap_used_ratio": "NaN"}, ""},
		{template.KV{"swap_used_ratio": "1.5"}, ""},
		{template.KV{"swap_used_ratio": "-0.1"}, ""},
		{template.KV{"swap_used_ratio": "lots"}, ""},
		{template.KV{"summary": "Swap is 54% full"}, ""},
		{nil, ""},
		// Only plain decimals: Go's ParseFloat also reads hex floats, "inf"
		// and underscores, which no Prometheus template writes.
		{template.KV{"swap_used_ratio": "0x1p-1"}, ""},
		{template.KV{"swap_used_ratio": "0x1p-1%"}, ""},
		{template.KV{"swap_used_ratio": "0X.8P0"}, ""},
		{template.KV{"swap_used_ratio": "0x1p-1", "swap_used_bytes": "0x40000000", "swap_total_bytes": "0x100000000"}, ""},
		{template.KV{"swap_used_ratio": "0x1p-1", "swap_used_bytes": "1073741824", "swap_total_bytes": "4294967296"}, "swap 25% full (1.0/4.0 GB)"},
		{template.KV{"swap_used_ratio": "0_5"}, ""},
		{template.KV{"swap_used_ratio": "infinity"}, ""},
		{template.KV{"swap_used_ratio": ".5"}, "swap 50% full"},
		{template.KV{"swap_used_ratio": "5e-1"}, "swap 50% full"},
		{template.KV{"swap_used_ratio": "5."}, ""},
	}
	for _, tt := range tests {
		s, ok := swapFromAnnotations(tt.ann)
		got := ""
		if ok {
			got = strings.TrimSuffix(pushtext.Swap(s).Body, " — consider intervening")
		}
		if got != tt.want {
			t.Errorf("swapFromAnnotations(%v) = %q, want %q", tt.ann, got, tt.want)
		}
	}
}

// TestPlanGolden records, for every payload in testdata, what the bridge
// pushes under the default flags and with --bark.send-resolved and
// --bark.only-swap. Run with -update to rewrite testdata/plans.golden.
// The clock is fixed, since some texts say how long an alert has fired.
func TestPlanGolden(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	configs := []struct {
		name  string
		tweak func(*fixtureConfig)
	}{
		{"default", nil},
		{"send-resolved", func(c *fixtureConfig) { c.SendResolved = true }},
		{"only-swap", func(c *fixtureConfig) { c.OnlySwap = true; c.SendResolved = true }},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, c := range configs {
		f := newFixture(t, nil, func(cfg *fixtureConfig) {
			cfg.Now = clock.Now
			if c.tweak != nil {
				c.tweak(cfg)
			}
		})
		fmt.Fprintf(&out, "## %s\n", c.name)
		for _, file := range files {
			msg, err := decodeWebhook(readTestdata(t, filepath.Base(file)))
			if err != nil {
				fmt.Fprintf(&out, "%s: error: %v\n", filepath.Base(file), err)
				continue
			}
			for _, p := range planPushes(f.hook, msg) {
				if p.delivery == nil {
					fmt.Fprintf(&out, "%s: %s skipped\n", filepath.Base(file), p.status)
					continue
				}
				fmt.Fprintf(&out, "%s: %s push %q log %q\n", filepath.Base(file), p.status,
					p.delivery.Text, delivery.RunlogLine(delivery.Subject(p.delivery.Subject), 1, 0))
			}
		}
	}
	golden := filepath.Join("testdata", "plans.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if out.String() != string(want) {
		t.Errorf("plans differ from %s (go test -update rewrites it):\n%s", golden, out.String())
	}
}

// giBytes is f GiB in bytes, truncated as a byte count is.
func giBytes(f float64) uint64 { return uint64(f * bytesPerGiB) }

// TestHexRatioPushesTheSummary: a swap alert whose ratio is not a plain
// decimal is pushed with its summary, never with a number read from hex.
func TestHexRatioPushesTheSummary(t *testing.T) {
	f := newFixture(t, nil, nil)
	d := f.hook.planAlert(template.Alert{
		Status:      "firing",
		Labels:      template.KV{"alertname": "SwapUsageHigh"},
		Annotations: template.KV{"swap_used_ratio": "0x1p-1", "summary": "Swap is filling up"},
	})
	if d == nil || d.Text != "[lavender-2] Swap is filling up" || d.Subject != "SwapUsageHigh" {
		t.Fatalf("plan = %+v, want the summary pushed", d)
	}
}

// formatChars are invisible format characters (Unicode category Cf) that
// reorder or hide text: the bidi overrides, embeddings and isolates, the
// direction marks, zero-width characters and the BOM.
var formatChars = []rune{'\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068', '\u2069', '\u200E', '\u200F', '\u200B', '\u061C', '\uFEFF', '\u00AD'}

func hasFormatChar(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.Is(unicode.Cf, r) })
}

// TestFormatCharsNeverReachAPush: an alert name or summary with a bidi
// override ("exe.gnp" shown as "png.exe") reaches no push, run-log line,
// webhook answer or status event with the override in it.
func TestFormatCharsNeverReachAPush(t *testing.T) {
	for _, r := range formatChars {
		if got := bark.Clip("a" + string(r) + "b"); got != "ab" {
			t.Errorf("bark.Clip(a %U b) = %q, want %q", r, got, "ab")
		}
		if got := delivery.Subject("a" + string(r) + "b"); got != "ab" {
			t.Errorf("delivery.Subject(a %U b) = %q", r, got)
		}
	}
	srv := barktest.New(t, "KEY")
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("KEY") + "\nhttp://" + strings.TrimPrefix(srv.URL, "http://") + "/WRONGKEY/$0"}, nil)
	evil := string(formatChars)
	body := `{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"Disk` + evil + `Full"},` +
		`"annotations":{"summary":"exe.` + "\u202E" + `gnp is full` + "\u2066" + `"},"startsAt":"2026-04-24T00:45:00Z"}]}`
	code, answer := f.post([]byte(body))
	if code != 200 || !strings.Contains(answer, "DiskFull: phone.bark.env:2 failed: HTTP 400") || hasFormatChar(answer) {
		t.Errorf("answer %d %q", code, answer)
	}
	pushes := srv.Pushes()
	if len(pushes) != 2 {
		t.Fatalf("pushes = %+v", pushes)
	}
	for _, p := range pushes {
		if p.Body != "[lavender-2] DiskFull: exe.gnp is full" {
			t.Errorf("push body %q", p.Body)
		}
	}
	if lines := f.barkLines(); len(lines) != 1 || lines[0] != "BARK DiskFull sent ok=1 fail=1" {
		t.Errorf("run log %q", lines)
	}
	for _, e := range f.bridge.Status().Events {
		if hasFormatChar(e.Subject) {
			t.Errorf("status event %q", e.Subject)
		}
	}
}
