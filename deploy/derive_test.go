package deploy

import (
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// The end-to-end test runs Prometheus and Alertmanager with configs derived
// from the shipped ones, so that it tests those and not copies. The helpers
// below do the derivation by replacing each setting that must change at
// exactly one known place: if a shipped file moves a setting, they fail
// loudly instead of leaving it unchanged.

func decodeYAMLLenient(t *testing.T, data []byte, out any) {
	t.Helper()
	if err := yaml.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
}

type prometheusConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	RuleFiles []string `yaml:"rule_files"`
	Alerting  struct {
		Alertmanagers []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"alertmanagers"`
	} `yaml:"alerting"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		BasicAuth *basicAuth `yaml:"basic_auth"`
	} `yaml:"scrape_configs"`
}

func loadPrometheusConfig(t *testing.T) prometheusConfig {
	t.Helper()
	var c prometheusConfig
	decodeYAMLLenient(t, readFile(t, "deploy", "prometheus", "prometheus.yml"), &c)
	return c
}

func (c prometheusConfig) lavenderTargets(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, sc := range c.ScrapeConfigs {
		if sc.JobName != "lavender" {
			continue
		}
		for _, s := range sc.StaticConfigs {
			out = append(out, s.Targets...)
		}
	}
	if len(out) == 0 {
		t.Fatal(`prometheus.yml has no targets for job "lavender", which LavenderDown watches`)
	}
	return out
}

func (c prometheusConfig) alertmanagerTargets() []string {
	var out []string
	for _, am := range c.Alerting.Alertmanagers {
		for _, s := range am.StaticConfigs {
			out = append(out, s.Targets...)
		}
	}
	return out
}

type basicAuth struct {
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
}

type alertmanagerConfig struct {
	Route     amRoute `yaml:"route"`
	Receivers []struct {
		Name           string `yaml:"name"`
		WebhookConfigs []struct {
			URL          string `yaml:"url"`
			SendResolved *bool  `yaml:"send_resolved"`
			HTTPConfig   struct {
				BasicAuth *basicAuth `yaml:"basic_auth"`
			} `yaml:"http_config"`
		} `yaml:"webhook_configs"`
	} `yaml:"receivers"`
}

type amRoute struct {
	Receiver       string    `yaml:"receiver"`
	GroupBy        []string  `yaml:"group_by"`
	GroupWait      string    `yaml:"group_wait"`
	GroupInterval  string    `yaml:"group_interval"`
	RepeatInterval string    `yaml:"repeat_interval"`
	Matchers       []string  `yaml:"matchers"`
	Routes         []amRoute `yaml:"routes"`
}

func loadAlertmanagerConfig(t *testing.T) alertmanagerConfig {
	t.Helper()
	var c alertmanagerConfig
	decodeYAMLLenient(t, readFile(t, "deploy", "alertmanager", "alertmanager.yml"), &c)
	return c
}

// barkURL is the one webhook URL of the bark receiver.
func (c alertmanagerConfig) barkURL(t *testing.T) string {
	t.Helper()
	for _, r := range c.Receivers {
		if r.Name == "bark" {
			if len(r.WebhookConfigs) != 1 {
				t.Fatalf("receiver bark has %d webhook configs, want 1", len(r.WebhookConfigs))
			}
			return r.WebhookConfigs[0].URL
		}
	}
	t.Fatal("alertmanager.yml has no receiver bark")
	return ""
}

func replaceOnce(t *testing.T, file, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("%s: %q occurs %d times, want exactly once; update the e2e config derivation", file, old, n)
	}
	return strings.Replace(s, old, new, 1)
}

// e2ePrometheusConfig derives the end-to-end test's Prometheus config from
// deploy/prometheus/prometheus.yml: 1s scrape and evaluation intervals, the
// given lavender and Alertmanager addresses (host:port), and alertsPath
// (absolute) as the rule file.
func e2ePrometheusConfig(t *testing.T, lavenderAddr, alertmanagerAddr, alertsPath string) []byte {
	t.Helper()
	const file = "deploy/prometheus/prometheus.yml"
	s := string(readFile(t, "deploy", "prometheus", "prometheus.yml"))
	s = replaceOnce(t, file, s, "scrape_interval: 15s", "scrape_interval: 1s")
	s = replaceOnce(t, file, s, "evaluation_interval: 15s", "evaluation_interval: 1s")
	s = replaceOnce(t, file, s, "- lavender:9877", "- "+strconv.Quote(lavenderAddr))
	s = replaceOnce(t, file, s, "- alertmanager:9093", "- "+strconv.Quote(alertmanagerAddr))
	s = replaceOnce(t, file, s, "- ../../alerts.yml", "- "+strconv.Quote(alertsPath))
	return []byte(s)
}

// e2eSwapFor is SwapUsageHigh's `for` in the end-to-end test's rules, in
// place of the shipped 30s: the chain is what the test checks, and
// alerts_test.yml's promtool cases check the shipped 30s itself.
const e2eSwapFor = "5s"

// e2eAlerts derives the end-to-end test's rules from alerts.yml, with
// SwapUsageHigh's `for` shortened to e2eSwapFor and nothing else changed,
// into dir; it returns the file's path.
func e2eAlerts(t *testing.T, dir string) string {
	t.Helper()
	s := string(readFile(t, "alerts.yml"))
	s = replaceOnce(t, "alerts.yml", s, "\n        for: 30s\n", "\n        for: "+e2eSwapFor+"\n")
	path := filepath.Join(dir, "e2e-alerts.yml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// e2eAlertmanagerConfig derives the end-to-end test's Alertmanager config
// from deploy/alertmanager/alertmanager.yml: 1s group wait and interval (so
// firing and resolved notifications go out at once), the repeat interval
// kept at 10m (so a second swap push within the test is a bug), and the
// bark webhook pointed at webhookURL.
func e2eAlertmanagerConfig(t *testing.T, webhookURL string) []byte {
	t.Helper()
	const file = "deploy/alertmanager/alertmanager.yml"
	s := string(readFile(t, "deploy", "alertmanager", "alertmanager.yml"))
	s = replaceOnce(t, file, s, "group_wait: 30s", "group_wait: 1s")
	s = replaceOnce(t, file, s, "group_interval: 5m", "group_interval: 1s")
	s = replaceOnce(t, file, s, "url: http://lavender:9877/webhook", "url: "+strconv.Quote(webhookURL))
	return []byte(s)
}

// The users the shipped files name in their commented-out basic_auth
// blocks; lavender's web config in the end-to-end test must list both.
const (
	e2eScrapeUser  = "prometheus"
	e2eWebhookUser = "alertmanager"
)

// e2ePrometheusBasicAuth uncomments the basic_auth block that
// prometheus.yml ships for the lavender job, as its comment tells users to,
// with passwordFile (absolute) in place of the example path.
func e2ePrometheusBasicAuth(t *testing.T, config []byte, passwordFile string) []byte {
	t.Helper()
	return []byte(replaceOnce(t, "deploy/prometheus/prometheus.yml", string(config),
		"    # basic_auth:\n"+
			"    #   username: "+e2eScrapeUser+"\n"+
			"    #   password_file: /etc/prometheus/lavender.password\n",
		"    basic_auth:\n"+
			"      username: "+e2eScrapeUser+"\n"+
			"      password_file: "+strconv.Quote(passwordFile)+"\n"))
}

// e2eAlertmanagerBasicAuth uncomments the http_config block that
// alertmanager.yml ships for the bark webhook, with passwordFile (absolute)
// in place of the example path.
func e2eAlertmanagerBasicAuth(t *testing.T, config []byte, passwordFile string) []byte {
	t.Helper()
	return []byte(replaceOnce(t, "deploy/alertmanager/alertmanager.yml", string(config),
		"        # http_config:\n"+
			"        #   basic_auth:\n"+
			"        #     username: "+e2eWebhookUser+"\n"+
			"        #     password_file: /etc/alertmanager/lavender.password\n",
		"        http_config:\n"+
			"          basic_auth:\n"+
			"            username: "+e2eWebhookUser+"\n"+
			"            password_file: "+strconv.Quote(passwordFile)+"\n"))
}

// TestE2EConfigsDerive proves the derivation works on today's files, and
// that the results still pass promtool and amtool.
func TestE2EConfigsDerive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	alerts := e2eAlerts(t, dir)
	promYAML := e2ePrometheusConfig(t, "127.0.0.1:40001", "127.0.0.1:40002", alerts)
	amYAML := e2eAlertmanagerConfig(t, "http://127.0.0.1:40001/webhook")

	var p prometheusConfig
	decodeYAMLLenient(t, promYAML, &p)
	if p.Global.ScrapeInterval != "1s" || p.Global.EvaluationInterval != "1s" {
		t.Errorf("derived intervals = %s/%s, want 1s/1s", p.Global.ScrapeInterval, p.Global.EvaluationInterval)
	}
	if got := p.lavenderTargets(t); len(got) != 1 || got[0] != "127.0.0.1:40001" {
		t.Errorf("derived lavender targets = %v", got)
	}
	if got := p.alertmanagerTargets(); len(got) != 1 || got[0] != "127.0.0.1:40002" {
		t.Errorf("derived alertmanager targets = %v", got)
	}
	if len(p.RuleFiles) != 1 || p.RuleFiles[0] != alerts {
		t.Errorf("derived rule_files = %v, want [%s]", p.RuleFiles, alerts)
	}
	derivedYAML, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	var derived ruleFile
	decodeYAML(t, derivedYAML, &derived, alerts)
	shipped := alertsByName(t, loadAlerts(t))
	for name, r := range alertsByName(t, derived) {
		want := shipped[name]
		if name == "SwapUsageHigh" {
			if want.For != "30s" || r.For != e2eSwapFor {
				t.Errorf("SwapUsageHigh's for: shipped %q, derived %q; want 30s and %s", want.For, r.For, e2eSwapFor)
			}
			want.For = r.For
		}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("derived rule %s differs from alerts.yml's beyond its for:\n%+v\n%+v", name, r, want)
		}
	}
	if len(alertsByName(t, derived)) != len(shipped) {
		t.Errorf("derived rules hold %d alerts, alerts.yml %d", len(alertsByName(t, derived)), len(shipped))
	}

	var a alertmanagerConfig
	decodeYAMLLenient(t, amYAML, &a)
	if u := a.barkURL(t); u != "http://127.0.0.1:40001/webhook" {
		t.Errorf("derived bark URL = %s", u)
	}
	if a.Route.GroupWait != "1s" || a.Route.GroupInterval != "1s" || a.Route.RepeatInterval != "10m" {
		t.Errorf("derived route timing = %s/%s/%s, want 1s/1s/10m", a.Route.GroupWait, a.Route.GroupInterval, a.Route.RepeatInterval)
	}

	// The basic-auth variants: the shipped, commented-out blocks, enabled.
	passwordFile := filepath.Join(dir, "lavender.password")
	if err := os.WriteFile(passwordFile, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	promAuthYAML := e2ePrometheusBasicAuth(t, promYAML, passwordFile)
	amAuthYAML := e2eAlertmanagerBasicAuth(t, amYAML, passwordFile)
	var pa prometheusConfig
	decodeYAMLLenient(t, promAuthYAML, &pa)
	for _, sc := range pa.ScrapeConfigs {
		want := basicAuth{Username: e2eScrapeUser, PasswordFile: passwordFile}
		if sc.JobName == "lavender" && (sc.BasicAuth == nil || *sc.BasicAuth != want) {
			t.Errorf("derived lavender scrape basic_auth = %+v, want %+v", sc.BasicAuth, want)
		}
	}
	var aa alertmanagerConfig
	decodeYAMLLenient(t, amAuthYAML, &aa)
	for _, r := range aa.Receivers {
		want := basicAuth{Username: e2eWebhookUser, PasswordFile: passwordFile}
		if r.Name == "bark" && (r.WebhookConfigs[0].HTTPConfig.BasicAuth == nil || *r.WebhookConfigs[0].HTTPConfig.BasicAuth != want) {
			t.Errorf("derived bark webhook basic_auth = %+v, want %+v", r.WebhookConfigs[0].HTTPConfig.BasicAuth, want)
		}
	}

	configs := map[string][]byte{
		"prometheus.yml":             promYAML,
		"prometheus-basicauth.yml":   promAuthYAML,
		"alertmanager.yml":           amYAML,
		"alertmanager-basicauth.yml": amAuthYAML,
	}
	for name, data := range configs {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("promtool", func(t *testing.T) {
		promtool := testkit.NeedTool(t, "prometheus", "promtool")
		runTool(t, dir, promtool, "check", "config", filepath.Join(dir, "prometheus.yml"))
		runTool(t, dir, promtool, "check", "config", filepath.Join(dir, "prometheus-basicauth.yml"))
	})
	t.Run("amtool", func(t *testing.T) {
		amtool := testkit.NeedTool(t, "prometheus-alertmanager", "amtool")
		runTool(t, dir, amtool, "check-config", filepath.Join(dir, "alertmanager.yml"))
		runTool(t, dir, amtool, "check-config", filepath.Join(dir, "alertmanager-basicauth.yml"))
	})
}

// TestAlertmanagerRouting checks the shipped route without amtool: the
// swap and stall alerts reach the bark webhook with send_resolved, the
// reminder cadence is 10m, and everything else has a default receiver.
func TestAlertmanagerRouting(t *testing.T) {
	c := loadAlertmanagerConfig(t)
	if c.Route.Receiver != "default" {
		t.Errorf("default receiver = %q, want default", c.Route.Receiver)
	}
	if c.Route.RepeatInterval != "10m" {
		t.Errorf("repeat_interval = %q, want 10m (the predecessor's reminder cadence)", c.Route.RepeatInterval)
	}
	if len(c.Route.Routes) != 1 || c.Route.Routes[0].Receiver != "bark" {
		t.Fatalf("routes = %+v, want one route to bark", c.Route.Routes)
	}
	if got := strings.Join(c.Route.Routes[0].Matchers, ","); got != `alertname=~"SwapUsageHigh|MemoryPressureHigh|OOMKill|PhaseStalled|PhaseProgressStalled|PhaseFailed|PhaseLossNotFinite|GPUXidError|GPUFallenOffBus|GPUHung|GPULost|GPURowRemapPending|GPURowRemapFailed|GPUECCErrors|GPUHardwareSlowdown|GPUTelemetryStuck|StorageErrors|DiskSaveWillNotFit|DiskSpaceLow|DiskInodesLow|DiskUnreadable"` {
		t.Errorf("bark route matchers = %s", got)
	}
	u, err := url.Parse(c.barkURL(t))
	if err != nil || u.String() != "http://lavender:9877/webhook" {
		t.Errorf("bark webhook = %v (%v), want http://lavender:9877/webhook", u, err)
	}
	for _, r := range c.Receivers {
		if r.Name == "bark" && (r.WebhookConfigs[0].SendResolved == nil || !*r.WebhookConfigs[0].SendResolved) {
			t.Error("bark webhook lacks send_resolved: true")
		}
	}
	// The bridge recognises SwapUsageHigh by name (--bark.swap-alertname),
	// and both routed alerts must exist.
	alerts := alertsByName(t, loadAlerts(t))
	for _, name := range []string{"SwapUsageHigh", "MemoryPressureHigh", "OOMKill", "PhaseStalled", "PhaseProgressStalled", "PhaseFailed",
		"PhaseLossNotFinite", "GPUXidError", "GPUFallenOffBus", "GPUHung", "GPULost", "GPURowRemapPending", "GPURowRemapFailed", "GPUECCErrors", "GPUHardwareSlowdown", "GPUTelemetryStuck", "StorageErrors",
		"DiskSaveWillNotFit", "DiskSpaceLow", "DiskInodesLow", "DiskUnreadable"} {
		if _, ok := alerts[name]; !ok {
			t.Errorf("alertmanager.yml routes %s, which alerts.yml does not define", name)
		}
	}
}

var dedupFlagRE = regexp.MustCompile(`--bark\.dedup-window=([0-9a-z]+)`)

// TestDedupWindowBetweenIntervals: delivery drops a notification it pushed
// within --bark.dedup-window. Every shipped way of running the webhook must
// set a window longer than Alertmanager's group_interval (retries, HA copies
// and the resend at the next group_interval stay deduplicated) and shorter
// than repeat_interval (the 10-minute reminder pushes again).
func TestDedupWindowBetweenIntervals(t *testing.T) {
	am := loadAlertmanagerConfig(t)
	groupInterval, err1 := time.ParseDuration(am.Route.GroupInterval)
	repeatInterval, err2 := time.ParseDuration(am.Route.RepeatInterval)
	if err1 != nil || err2 != nil {
		t.Fatalf("alertmanager.yml intervals: %v %v", err1, err2)
	}
	for _, f := range [][]string{
		{"deploy", "docker-compose.yml"},
		{"deploy", "systemd", "lavender.service"},
		{"deploy", "kubernetes", "bridge.yaml"},
	} {
		name := filepath.Join(f...)
		m := dedupFlagRE.FindAllStringSubmatch(string(readFile(t, f...)), -1)
		if len(m) != 1 {
			t.Errorf("%s: %d --bark.dedup-window flags, want 1", name, len(m))
			continue
		}
		d, err := time.ParseDuration(m[0][1])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if d <= groupInterval || d >= repeatInterval {
			t.Errorf("%s: --bark.dedup-window=%s, want between group_interval %s and repeat_interval %s", name, d, groupInterval, repeatInterval)
		}
	}
}
