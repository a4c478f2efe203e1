package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestAuthEveryEndpoint: with TLS and basic auth from --web.config.file,
// every endpoint of serve, exporter and bridge answers 401 without
// credentials or with wrong ones, nothing is acted on, and everything
// works with the right ones.
func TestAuthEveryEndpoint(t *testing.T) {
	t.Parallel() // its own process: no state of the test process is shared
	const user, pass = "alertmanager", "correct horse battery staple"
	certs := testkit.NewTLS(t)
	webConfig := testkit.WriteWebConfig(t, testkit.WebConfig{TLS: certs, Users: map[string]string{user: pass}})
	client := certs.Client()
	bark := barktest.New(t)
	barkDir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": bark.Template(barktest.Key) + "\n"})

	type call struct {
		method, path string
		body         []byte
		want         int // with credentials
	}
	webhook := call{"POST", "/webhook", testkit.SwapAlertWebhook(1), 200}
	reload := call{"POST", "/-/reload", nil, 200}
	metrics := call{"GET", "/metrics", nil, 200}
	api := []call{
		{"POST", "/api/v1/heartbeat", []byte(`{"phase":"Train","event":"start"}`), 200},
		{"GET", "/api/v1/phases", nil, 200},
		{"GET", "/api/v1/status", nil, 200}, // the status page's JSON; "/" is below
		{"POST", "/api/v1/runs", []byte(`{"header":"auth test"}`), 201},
	}
	lifecycle := []call{{"GET", "/-/healthy", nil, 200}, {"GET", "/-/ready", nil, 200}, {"GET", "/", nil, 200}}

	for _, tc := range []struct {
		args  []string
		calls []call
	}{
		{testkit.QuietServeArgs(t, barkDir, t.TempDir()), append(append([]call{webhook, reload, metrics}, api...), lifecycle...)},
		{[]string{"exporter", "--web.listen-address=127.0.0.1:0", "--path.procfs=" + testkit.SwapProcfs(t, 0.10), "--runlog.dir=" + t.TempDir()},
			append(append([]call{metrics}, api...), lifecycle...)},
		{[]string{"bridge", "--web.listen-address=127.0.0.1:0", "--bark.config-dir=" + barkDir, "--runlog.dir=" + t.TempDir()},
			append([]call{webhook, reload, metrics}, lifecycle...)},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			command := testkit.StartCommand(t, append(tc.args, "--web.config.file="+webConfig)...)
			base := command.URL(t)
			if !strings.HasPrefix(base, "https://") {
				t.Fatalf("%s serves %s, not TLS", tc.args[0], base)
			}
			testkit.WaitReady(t, client, base, user, pass)
			pushesBefore := bark.Count()
			for _, c := range tc.calls {
				for _, cred := range [][2]string{{"", ""}, {user, "wrong"}, {"intruder", pass}} {
					code, body := testkit.MustDo(t, client, c.method, base+c.path, c.body, cred[0], cred[1])
					if code != http.StatusUnauthorized {
						t.Errorf("%s %s as %q: %d %q, want 401", c.method, c.path, cred[0], code, body)
					}
				}
			}
			if n := bark.Count() - pushesBefore; n != 0 {
				t.Errorf("unauthenticated webhooks pushed %d times", n)
			}
			for _, c := range tc.calls {
				if code, body := testkit.MustDo(t, client, c.method, base+c.path, c.body, user, pass); code != c.want {
					t.Errorf("%s %s with credentials: %d %q, want %d", c.method, c.path, code, body, c.want)
				}
			}
			if tc.args[0] != "exporter" {
				if n := bark.Count() - pushesBefore; n != 1 {
					t.Errorf("authenticated webhook pushed %d times, want 1", n)
				}
			}
			// Plain HTTP to the TLS port gets no service either.
			plain := &http.Client{Timeout: 10 * time.Second}
			if code, _, err := testkit.Do(plain, "GET", strings.Replace(base, "https://", "http://", 1)+"/metrics", nil, user, pass); err == nil && code == 200 {
				t.Errorf("plain HTTP on the TLS listener answered 200")
			}
		})
	}
}
