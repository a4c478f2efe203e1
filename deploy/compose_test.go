package deploy

import (
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// No Docker engine runs in CI, so these tests check docker-compose.yml and
// the Dockerfile by reading them: every file they mount exists, and every
// address one service uses for another names a service and port that exist.

func loadCompose(t *testing.T) map[string]any {
	t.Helper()
	docs := decodeYAMLDocs(t, readFile(t, "deploy", "docker-compose.yml"), "docker-compose.yml")
	if len(docs) != 1 {
		t.Fatalf("docker-compose.yml has %d documents, want 1", len(docs))
	}
	return docs[0]
}

func stringList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		out = append(out, toString(e))
	}
	return out
}

// composeMounts maps each container path of a service's volumes to its
// source (a path relative to deploy/, a named volume, or an ${VAR:-default}).
func composeMounts(t *testing.T, service string) map[string]string {
	t.Helper()
	svc := dig(loadCompose(t), "services", service)
	if svc == nil {
		t.Fatalf("docker-compose.yml has no service %s", service)
	}
	m := map[string]string{}
	for _, v := range stringList(dig(svc, "volumes")) {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Fatalf("service %s: volume %q has no container path", service, v)
		}
		m[parts[1]] = parts[0]
	}
	return m
}

// flagValue finds --name=value in a command list.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func TestCompose(t *testing.T) {
	c := loadCompose(t)
	services, _ := dig(c, "services").(map[string]any)
	for _, s := range []string{"lavender", "prometheus", "alertmanager", "grafana"} {
		if services[s] == nil {
			t.Fatalf("docker-compose.yml lacks service %s", s)
		}
	}

	// lavender: built from this repository, serve with the watchdog off.
	if cmd := stringList(dig(c, "services", "lavender", "command")); len(cmd) < 2 || cmd[0] != "serve" || cmd[1] != "--watchdog.interval=0" {
		t.Errorf("lavender command = %q, want serve --watchdog.interval=0 …", cmd)
	}
	ctx := digString(c, "services", "lavender", "build", "context")
	dockerfile := digString(c, "services", "lavender", "build", "dockerfile")
	if _, err := os.Stat(filepath.Join(ctx, dockerfile)); err != nil || ctx != ".." {
		t.Errorf("lavender build context %q dockerfile %q: want the repository root and deploy/Dockerfile (%v)", ctx, dockerfile, err)
	}

	// Every port on loopback only: the heartbeat API has no auth by default.
	for name := range services {
		for _, p := range stringList(dig(c, "services", name, "ports")) {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %q beyond loopback", name, p)
			}
		}
	}

	// Bind mounts name files that exist (paths are relative to deploy/).
	volumes, _ := dig(c, "volumes").(map[string]any)
	for name := range services {
		for dst, src := range composeMounts(t, name) {
			switch {
			case strings.HasPrefix(src, "${"):
				// The user's Bark directory; created by hand, see the comment.
			case strings.HasPrefix(src, "."):
				if _, err := os.Stat(src); err != nil {
					t.Errorf("service %s mounts missing %s at %s", name, src, dst)
				}
			default:
				if _, ok := volumes[src]; !ok {
					t.Errorf("service %s uses undeclared volume %s", name, src)
				}
			}
		}
	}

	// Prometheus reads the mounted config, and its relative rule_files
	// entry resolves, inside the container, to the mounted alerts.yml.
	promArgs := stringList(dig(c, "services", "prometheus", "command"))
	promConfig := flagValue(promArgs, "--config.file")
	promMounts := composeMounts(t, "prometheus")
	if promMounts[promConfig] != "./prometheus/prometheus.yml" {
		t.Fatalf("prometheus --config.file=%s is not the mounted ./prometheus/prometheus.yml (mounts %v)", promConfig, promMounts)
	}
	prom := loadPrometheusConfig(t)
	for _, rf := range prom.RuleFiles {
		inContainer := path.Join(path.Dir(promConfig), rf)
		if promMounts[inContainer] != "../alerts.yml" {
			t.Errorf("rule file %s resolves to %s in the container, where ../alerts.yml is not mounted", rf, inContainer)
		}
	}

	// Prometheus → lavender and → Alertmanager, Alertmanager → lavender,
	// Grafana → Prometheus: each address is a compose service on the port
	// that service listens on.
	listens := map[string]string{"lavender": "9877", "prometheus": "9090", "alertmanager": "9093", "grafana": "3000"}
	checkAddr := func(what, hostport string) {
		t.Helper()
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		if listens[host] != port {
			t.Errorf("%s = %s, but compose service %q listens on %q", what, hostport, host, listens[host])
		}
	}
	for name, svcPort := range listens {
		found := false
		for _, p := range stringList(dig(c, "services", name, "ports")) {
			if strings.HasSuffix(p, ":"+svcPort) {
				found = true
			}
		}
		if !found {
			t.Errorf("service %s does not publish its port %s", name, svcPort)
		}
	}
	for _, tg := range prom.lavenderTargets(t) {
		checkAddr("prometheus.yml lavender target", tg)
	}
	for _, tg := range prom.alertmanagerTargets() {
		checkAddr("prometheus.yml alertmanager target", tg)
	}
	am := loadAlertmanagerConfig(t)
	u, err := url.Parse(am.barkURL(t))
	if err != nil {
		t.Fatal(err)
	}
	checkAddr("alertmanager.yml bark webhook", u.Host)
	if u.Path != "/webhook" {
		t.Errorf("bark webhook path = %q, want /webhook", u.Path)
	}
	amArgs := stringList(dig(c, "services", "alertmanager", "command"))
	if src := composeMounts(t, "alertmanager")[flagValue(amArgs, "--config.file")]; src != "./alertmanager/alertmanager.yml" {
		t.Errorf("alertmanager --config.file is not the mounted ./alertmanager/alertmanager.yml")
	}
	var ds struct {
		Datasources []struct {
			URL string `yaml:"url"`
		} `yaml:"datasources"`
	}
	decodeYAMLLenient(t, readFile(t, "deploy", "grafana", "provisioning", "datasources", "lavender.yml"), &ds)
	for _, d := range ds.Datasources {
		u, err := url.Parse(d.URL)
		if err != nil {
			t.Fatal(err)
		}
		checkAddr("grafana datasource", u.Host)
	}
	if src := composeMounts(t, "grafana")["/etc/grafana/provisioning"]; src != "./grafana/provisioning" {
		t.Errorf("grafana provisioning mount = %q, want ./grafana/provisioning", src)
	}
}

func TestDockerfile(t *testing.T) {
	df := string(readFile(t, "deploy", "Dockerfile"))
	var stages, users []string
	for _, line := range strings.Split(df, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			stages = append(stages, f[1])
		case "USER":
			users = append(users, f[1])
		}
	}
	if len(stages) < 2 {
		t.Errorf("Dockerfile has %d stages, want a build stage and a small runtime stage", len(stages))
	}
	if len(users) == 0 {
		t.Fatal("Dockerfile sets no USER: the image would run as root")
	}
	if u := users[len(users)-1]; u == "root" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root:") {
		t.Errorf("final USER %s is root", u)
	}
	if !strings.Contains(df, "./cmd/lavender") {
		t.Error("Dockerfile does not build ./cmd/lavender")
	}
	if _, err := os.Stat(repoPath("cmd", "lavender")); err != nil {
		t.Errorf("the Dockerfile builds ./cmd/lavender: %v", err)
	}
	ignore := string(readFile(t, "deploy", "Dockerfile.dockerignore"))
	lines := strings.Split(ignore, "\n")
	if len(lines) == 0 || !strings.Contains(ignore, "\n*\n") {
		t.Error("Dockerfile.dockerignore must exclude everything by default (a line \"*\"), so no *.bark.env reaches the build")
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "!") && (strings.Contains(l, "env") || l == "!*" || l == "!**") {
			t.Errorf("Dockerfile.dockerignore re-includes %q, which could carry Bark keys into the image", l)
		}
	}
}
