package webhook

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/watchdog"
)

// incidentStart is when the test incidents began.
var incidentStart = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newTestClock() *testkit.Clock { return testkit.NewClock(incidentStart) }

// webhookAlert is one alert of a webhook: firing while endsAt is zero.
type webhookAlert struct {
	name, instance, fingerprint string
	startsAt, endsAt            time.Time
	annotations                 map[string]string
}

// webhookBody is an Alertmanager v4 webhook carrying the alerts.
func webhookBody(t testing.TB, alerts ...webhookAlert) []byte {
	t.Helper()
	msg := WebhookMessage{Version: "4", GroupKey: "{}:{}"}
	for _, a := range alerts {
		status := "firing"
		if !a.endsAt.IsZero() {
			status = "resolved"
		}
		msg.Alerts = append(msg.Alerts, template.Alert{
			Status:      status,
			Labels:      template.KV{"alertname": a.name, "instance": a.instance},
			Annotations: template.KV(a.annotations),
			StartsAt:    a.startsAt,
			EndsAt:      a.endsAt,
			Fingerprint: a.fingerprint,
		})
	}
	body, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

var swapAnnotations = map[string]string{"swap_ratio": "0.51", "swap_used_bytes": "17501991731", "swap_total_bytes": "34359738368"}

// TestIncidentIDFiringReminderResolved: the firing push, Alertmanager's
// reminder (after the dedup window) and the resolved push of one incident
// carry one id, so each replaces the one before on the phone; the resolved
// text says how long it lasted; the group is the alert's host, port cut;
// another incident (another alert, or the same alert starting again) has
// another id.
func TestIncidentIDFiringReminderResolved(t *testing.T) {
	srv := barktest.New(t)
	clock := newTestClock()
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) {
		c.SendResolved, c.Now = true, clock.Now
	})
	firing := webhookAlert{name: "SwapUsageHigh", instance: "gpu-3:9100", fingerprint: "aaaa000000000001", startsAt: incidentStart, annotations: swapAnnotations}
	resolved := firing
	resolved.endsAt = incidentStart.Add(42 * time.Minute)
	resolved.annotations = map[string]string{"swap_used_ratio": "0.51", "swap_used_bytes": "17501991731", "swap_total_bytes": "34359738368", "swap_threshold_ratio": "0.5"}
	other := webhookAlert{name: "PhaseStalled", instance: "gpu-4:9100", fingerprint: "bbbb000000000002", startsAt: incidentStart}
	again := firing
	again.startsAt = incidentStart.Add(2 * time.Hour)

	steps := []struct {
		body    []byte
		advance time.Duration
	}{
		{webhookBody(t, firing), 0},
		{webhookBody(t, firing), 2 * time.Hour}, // Alertmanager's reminder, past the dedup window
		{webhookBody(t, resolved), 0},
		{webhookBody(t, other), 0},
		{webhookBody(t, again), 0},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		if code, answer := f.post(s.body); code != 200 || !strings.HasPrefix(answer, "alerts=1 pushed=1 ") {
			t.Fatalf("webhook %d: %d %q", i, code, answer)
		}
	}
	got := srv.Pushes()
	if len(got) != 5 {
		t.Fatalf("%d pushes, want 5", len(got))
	}
	if got[0].ID == "" || got[1].ID != got[0].ID || got[2].ID != got[0].ID {
		t.Errorf("firing, reminder, resolved ids %q %q %q: want one id", got[0].ID, got[1].ID, got[2].ID)
	}
	if got[3].ID == got[0].ID || got[4].ID == got[0].ID || got[3].ID == got[4].ID {
		t.Errorf("ids of different incidents agree: %q %q %q", got[0].ID, got[3].ID, got[4].ID)
	}
	if want := "[lavender-2] resolved: swap back under 50% after 42m"; got[2].Body != want {
		t.Errorf("resolved body %q, want %q", got[2].Body, want)
	}
	for i, want := range []string{"gpu-3", "gpu-3", "gpu-3", "gpu-4", "gpu-3"} {
		if got[i].Group != want {
			t.Errorf("push %d group %q, want %q", i, got[i].Group, want)
		}
		if got[i].URL != "" {
			t.Errorf("push %d has url %q without --web.external-url", i, got[i].URL)
		}
	}
}

// TestIncidentHAPair: two bridges (no shared memory) behind an HA pair of
// Alertmanagers both get the same alert; both push it, with the same id,
// so the phone shows one notification per incident.
func TestIncidentHAPair(t *testing.T) {
	srv := barktest.New(t)
	files := map[string]string{"phone.bark.env": srv.Template(barktest.Key)}
	a := newFixture(t, files, func(c *fixtureConfig) { c.SendResolved = true })
	b := newFixture(t, files, func(c *fixtureConfig) { c.SendResolved = true })
	firing := webhookAlert{name: "SwapUsageHigh", instance: "gpu-3:9100", fingerprint: "aaaa000000000001", startsAt: incidentStart, annotations: swapAnnotations}
	resolved := firing
	resolved.endsAt = incidentStart.Add(10 * time.Minute)
	other := webhookAlert{name: "PhaseFailed", instance: "gpu-3:9100", fingerprint: "cccc000000000003", startsAt: incidentStart}
	for _, body := range [][]byte{webhookBody(t, firing, other), webhookBody(t, resolved)} {
		var wg sync.WaitGroup
		for _, f := range []*fixture{a, b} {
			wg.Go(func() {
				if code, answer := f.post(body); code != 200 {
					t.Errorf("webhook: %d %q", code, answer)
				}
			})
		}
		wg.Wait()
	}
	got := srv.Pushes()
	if len(got) != 6 {
		t.Fatalf("%d pushes, want 6 (3 notifications from each bridge)", len(got))
	}
	notifications := map[string]int{} // id -> pushes
	for _, p := range got {
		if p.ID == "" {
			t.Fatalf("push without id: %q", p.Body)
		}
		notifications[p.ID]++
	}
	if len(notifications) != 2 {
		t.Errorf("the phone shows %d notifications, want 2 (one per incident): %v", len(notifications), notifications)
	}
}

// TestIncidentTemplateKeepsItsOwnParams: a template that sets group, id,
// url, level or isArchive, in any case, keeps its value; the rest are
// added, and url is the external URL.
func TestIncidentTemplateKeepsItsOwnParams(t *testing.T) {
	srv := barktest.New(t)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.URL + "/KEY/$0?Group=mine&LEVEL=active\n" +
		srv.URL + "/KEY/$0?ID=fixed&Url=https%3A%2F%2Fmine.example%2F&isarchive=1\n"},
		func(c *fixtureConfig) { c.ExternalURL = "https://gpu-3.example:9110/" })
	firing := webhookAlert{name: "SwapUsageHigh", instance: "gpu-3:9100", fingerprint: "aaaa000000000001", startsAt: incidentStart, annotations: swapAnnotations}
	if code, answer := f.post(webhookBody(t, firing)); code != 200 {
		t.Fatalf("webhook: %d %q", code, answer)
	}
	got := srv.Pushes()
	if len(got) != 2 {
		t.Fatalf("%d pushes", len(got))
	}
	id := incidentID("aaaa000000000001", incidentStart)
	byTemplate := map[string]barktest.Push{}
	for _, p := range got {
		byTemplate[p.Group] = p
	}
	first, second := byTemplate["mine"], byTemplate["gpu-3"]
	if first.ID != id || first.Level != "active" || first.URL != "https://gpu-3.example:9110/" || first.IsArchive != "0" {
		t.Errorf("first template: id %q level %q url %q isArchive %q", first.ID, first.Level, first.URL, first.IsArchive)
	}
	if second.ID != "fixed" || second.URL != "https://mine.example/" || second.IsArchive != "1" || second.Level != "passive" {
		t.Errorf("second template: id %q url %q isArchive %q level %q", second.ID, second.URL, second.IsArchive, second.Level)
	}
}

// TestIncidentDeleteOnResolve: with DeleteOnResolve the resolution is a
// delete=1 of the incident's id, and its text is not in the URL.
func TestIncidentDeleteOnResolve(t *testing.T) {
	srv := barktest.New(t)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) {
		c.SendResolved, c.DeleteOnResolve = true, true
	})
	firing := webhookAlert{name: "SwapUsageHigh", instance: "gpu-3:9100", fingerprint: "aaaa000000000001", startsAt: incidentStart, annotations: swapAnnotations}
	resolved := firing
	resolved.endsAt = incidentStart.Add(42 * time.Minute)
	for _, body := range [][]byte{webhookBody(t, firing), webhookBody(t, resolved)} {
		if code, answer := f.post(body); code != 200 {
			t.Fatalf("webhook: %d %q", code, answer)
		}
	}
	got := srv.Pushes()
	if len(got) != 2 {
		t.Fatalf("%d pushes", len(got))
	}
	del := got[1]
	if del.Delete != "1" || del.ID != got[0].ID || del.ID == "" {
		t.Errorf("resolution: delete %q id %q, want delete=1 with the firing push's id %q", del.Delete, del.ID, got[0].ID)
	}
	if strings.Contains(del.RequestURI, "resolved") || strings.Contains(del.RequestURI, "swap") {
		t.Errorf("the deleting push carries the text: %s", del.RequestURI)
	}
	if lines := f.barkLines(); len(lines) != 2 || !strings.HasPrefix(lines[1], "BARK resolved swap ") {
		t.Errorf("run log %q", lines)
	}
}

// TestEncryptedPushesEveryMode: a target under a BARK_ENCRYPTION line
// sends ciphertext and iv by POST, for every algorithm; the app's own
// decryption (appDecrypt, written independently) reads the message, the
// group and the url; the id stays outside; nothing of the message is in
// the request line; a clear target beside it is unchanged.
func TestEncryptedPushesEveryMode(t *testing.T) {
	keys := map[int]string{16: "0123456789abcdef", 24: "0123456789abcdef01234567", 32: "0123456789abcdef0123456789abcdef"}
	for _, alg := range []struct {
		name, mode string
		keyLen     int
	}{
		{"aes-128-gcm", "gcm", 16}, {"aes-192-gcm", "gcm", 24}, {"aes-256-gcm", "gcm", 32},
		{"aes-128-cbc", "cbc", 16}, {"aes-192-cbc", "cbc", 24}, {"aes-256-cbc", "cbc", 32},
	} {
		t.Run(alg.name, func(t *testing.T) {
			srv := barktest.New(t, "KEY", "CLEAR")
			key := keys[alg.keyLen]
			f := newFixture(t, map[string]string{"phone.bark.env": srv.Template("CLEAR") + "\n" +
				bark.EncryptionKey + "=" + alg.name + ":" + key + "\n" + srv.Template("KEY") + "\n"},
				func(c *fixtureConfig) { c.ExternalURL = "https://gpu-3.example/" })
			firing := webhookAlert{name: "SwapUsageHigh", instance: "gpu-3:9100", fingerprint: "aaaa000000000001", startsAt: incidentStart, annotations: swapAnnotations}
			if code, answer := f.post(webhookBody(t, firing)); code != 200 || !strings.HasPrefix(answer, "alerts=1 pushed=1 ") {
				t.Fatalf("webhook: %d %q", code, answer)
			}
			var enc, clear barktest.Push
			for _, p := range srv.Pushes() {
				if p.DeviceKey == "KEY" {
					enc = p
				} else {
					clear = p
				}
			}
			const text = "[lavender-2] swap 51% full (16.3/32.0 GB) — consider intervening"
			if clear.Body != text || clear.Encrypted() {
				t.Errorf("clear target: body %q encrypted %v", clear.Body, clear.Encrypted())
			}
			if enc.Method != "POST" || !enc.Encrypted() || enc.IV == "" {
				t.Fatalf("encrypted target: %s ciphertext %q iv %q", enc.Method, enc.Ciphertext, enc.IV)
			}
			if strings.Contains(enc.RequestURI, "swap") || strings.Contains(enc.RequestURI, "full") || strings.Contains(enc.RequestURI, "gpu-3") {
				t.Errorf("the request line carries the message: %s", enc.RequestURI)
			}
			id := incidentID("aaaa000000000001", incidentStart)
			if enc.ID != id {
				t.Errorf("id outside the ciphertext %q, want %q", enc.ID, id)
			}
			plain := barktest.AppDecrypt(t, alg.mode, key, enc.IV, enc.Ciphertext)
			for k, want := range map[string]string{"body": text, "group": "gpu-3", "url": "https://gpu-3.example/", "level": "passive", "isarchive": "0", "id": id} {
				if plain[k] != want {
					t.Errorf("decrypted %s = %q, want %q (all: %v)", k, plain[k], want, plain)
				}
			}
		})
	}
}

// TestEncryptionSettingErrors: a bad BARK_ENCRYPTION line is a file:line
// error that never shows the key; the templates under it are refused (not
// sent in clear); the other files' targets load.
func TestEncryptionSettingErrors(t *testing.T) {
	const secret = "SECRETSECRETSECR" // 16 characters, wrong for aes-256
	dir := barktest.ConfigDir(t, map[string]string{
		"bad.bark.env":  "# phone\n" + bark.EncryptionKey + "=aes-256-gcm:" + secret + "\nhttps://api.day.app/DEVICEKEY1/$0\n",
		"good.bark.env": bark.EncryptionKey + "='aes-128-cbc:" + secret + "'\nhttps://api.day.app/DEVICEKEY2/$0\n",
	})
	res, err := bark.LoadTargets(dir)
	if err == nil {
		t.Fatal("no error for a bad BARK_ENCRYPTION line")
	}
	for _, want := range []string{"bad.bark.env:2: " + bark.EncryptionKey + ": aes-256-gcm needs a key of exactly 32 characters, this one has 16", "bad.bark.env:3: not loaded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "DEVICEKEY") {
		t.Errorf("error shows a secret: %v", err)
	}
	if len(res.Targets) != 1 || res.Targets[0].Name() != "good.bark.env:2" || res.Targets[0].Encryption() != "aes-128-cbc" {
		t.Errorf("targets %v", res.Targets)
	}
	if got := bark.Scrub("key " + secret); strings.Contains(got, secret) {
		t.Errorf("the encryption key is not among the scrubbed secrets: %q", got)
	}
}

// TestStormThroughTheWebhook: 100 alerts to one phone within a minute give
// 10 pushes, then, when the minute is over, 1 summary; the 90 held alerts
// are answered 200, counted in lavender_bark_pushes_held_total, and the
// summary writes one BARK line.
func TestStormThroughTheWebhook(t *testing.T) {
	srv := barktest.New(t)
	clock := newTestClock()
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) {
		c.Now, c.MaxPerMinute = clock.Now, delivery.DefaultMaxPerMinute
	})
	for i := range 100 {
		name := "SwapUsageHigh"
		if i%10 == 9 {
			name = "PhaseStalled"
		}
		a := webhookAlert{name: name, instance: "gpu-" + string(rune('a'+i%26)) + ":9100", fingerprint: incidentID(name, incidentStart.Add(time.Duration(i)))[:16], startsAt: incidentStart}
		code, answer := f.post(webhookBody(t, a))
		if code != 200 {
			t.Fatalf("alert %d: %d %q", i, code, answer)
		}
		if i >= 10 && !strings.Contains(answer, "held=1") {
			t.Fatalf("alert %d: %q, want it held", i, answer)
		}
		clock.Advance(500 * time.Millisecond) // 100 alerts in 50 s
	}
	if n := len(srv.Pushes()); n != 10 {
		t.Fatalf("%d pushes within the minute, want 10", n)
	}
	if v := f.metrics().MustValue(t, delivery.HeldPushesMetric, testkit.Labels{"target": "phone.bark.env:1"}); v != 90 {
		t.Errorf("%s = %v, want 90", delivery.HeldPushesMetric, v)
	}
	f.bridge.SendDue(t.Context(), clock.Now()) // 50 s: the window is still full
	if n := len(srv.Pushes()); n != 10 {
		t.Fatalf("a summary went out before the minute ended: %d pushes", n)
	}
	clock.Advance(15 * time.Second)
	f.bridge.SendDue(t.Context(), clock.Now())
	got := srv.Pushes()
	if len(got) != 11 {
		t.Fatalf("%d pushes, want 10 and 1 summary", len(got))
	}
	summary := got[10]
	if want := "[lavender-2] 90 more alerts in the last minute: SwapUsageHigh ×81, PhaseStalled ×9"; summary.Body != want {
		t.Errorf("summary %q, want %q", summary.Body, want)
	}
	if summary.ID != "" {
		t.Errorf("summary has id %q; it stands for many incidents", summary.ID)
	}
	lines := f.barkLines()
	if len(lines) != 11 || lines[10] != "BARK 90 more alerts sent ok=1 fail=0" {
		t.Errorf("run log %q", lines)
	}
	if v := f.metrics().MustValue(t, "lavender_webhook_alerts_total", testkit.Labels{"status": "firing", "action": delivery.ActionHeld}); v != 90 {
		t.Errorf("held alerts counted %v, want 90", v)
	}
}

// TestStormHoldsWatchdogAndResolvedPushes: resolved and watchdog pushes
// count against the same limit.
func TestStormHoldsWatchdogAndResolvedPushes(t *testing.T) {
	srv := barktest.New(t)
	clock := newTestClock()
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) {
		c.Now, c.MaxPerMinute, c.SendResolved = clock.Now, 2, true
	})
	firing := webhookAlert{name: "SwapUsageHigh", instance: "gpu-3:9100", fingerprint: "aaaa000000000001", startsAt: incidentStart, annotations: swapAnnotations}
	resolved := firing
	resolved.endsAt = incidentStart.Add(time.Minute)
	f.post(webhookBody(t, firing))
	if code, answer := f.post(webhookBody(t, resolved)); code != 200 || !strings.HasPrefix(answer, "alerts=1 pushed=1 ") {
		t.Fatalf("resolved: %d %q", code, answer)
	}
	ok, failed := f.pusher.Push(t.Context(), []watchdog.Alert{swapAlert(0.6, giBytes(19.2), 32*bytesPerGiB)})
	if len(srv.Pushes()) != 2 {
		t.Errorf("%d pushes, want 2: the watchdog's third push in a minute is held", len(srv.Pushes()))
	}
	if ok != 1 || failed != 0 {
		t.Errorf("held watchdog push answered %d, %d; want it counted as delivered (1, 0)", ok, failed)
	}
}

// TestOOMKillEachRiseIsItsOwnPush: alerts.yml makes each rise of the kill
// counter an OOMKill alert of its own (its oom_kills_total label, so its
// own fingerprint), as serve's watchdog pushes each rise. A second kill 3
// minutes after the first comes in the group's next notification beside
// the first one's resolution: it is pushed with its own count, as a new
// incident, and the first one's resolution (an event's) is not.
func TestOOMKillEachRiseIsItsOwnPush(t *testing.T) {
	srv := barktest.New(t)
	clock := newTestClock()
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, func(c *fixtureConfig) {
		c.SendResolved, c.Now = true, clock.Now
	})
	oom := map[string]string{"active_phase": "", "oom_kills": "1", "swap_used_bytes": "1202590842", "swap_total_bytes": "2147483648"}
	first := webhookAlert{name: "OOMKill", instance: "gpu-3:9877", fingerprint: "dddd000000000001", startsAt: incidentStart, annotations: oom}
	firstOver := first
	firstOver.endsAt = incidentStart.Add(3 * time.Minute)
	second := webhookAlert{name: "OOMKill", instance: "gpu-3:9877", fingerprint: "dddd000000000002", startsAt: incidentStart.Add(3 * time.Minute), annotations: oom}
	f.post(webhookBody(t, first))
	clock.Advance(5 * time.Minute)
	if code, answer := f.post(webhookBody(t, firstOver, second)); code != 200 {
		t.Fatalf("webhook: %d %q", code, answer)
	}
	got := srv.Pushes()
	if len(got) != 2 {
		t.Fatalf("%d pushes, want 2 (one per rise, no resolution): %+v", len(got), got)
	}
	want := "[lavender-2] OOM killer struck (1 kill), victim unknown — swap 56% full (1.1/2.0 GB)"
	for i, p := range got {
		if p.Body != want {
			t.Errorf("push %d: %q, want %q", i, p.Body, want)
		}
	}
	if got[0].ID == got[1].ID {
		t.Errorf("the two rises share the notification id %q", got[0].ID)
	}
}
