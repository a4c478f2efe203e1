package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// composeNamed are the config files that name the other programs by their
// Compose service names, which a user outside Compose must change.
var composeNamed = []string{
	"deploy/prometheus/prometheus.yml",
	"deploy/alertmanager/alertmanager.yml",
	"deploy/grafana/provisioning/datasources/lavender.yml",
}

// composeName is a Compose service name with its port, as the configs
// write an address.
var composeName = regexp.MustCompile(`\b(lavender|alertmanager|prometheus|grafana):[0-9]+\b`)

// withoutComposeSection is docs/prometheus.md's section on changing those
// names.
func withoutComposeSection(t *testing.T) string {
	t.Helper()
	doc := string(readFile(t, "docs", "prometheus.md"))
	_, rest, ok := strings.Cut(doc, "\n## Without Docker Compose\n")
	if !ok {
		t.Fatal(`docs/prometheus.md has no "## Without Docker Compose" section`)
	}
	section, _, _ := strings.Cut(rest, "\n## ")
	return section
}

// composeNamesIn lists "file name" for every Compose name in the files
// under root (comments included: a comment naming the address misleads
// as much as the setting).
func composeNamesIn(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	for _, file := range composeNamed {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range composeName.FindAllString(string(b), -1) {
			if pair := file + " " + name; !slices.Contains(found, pair) {
				found = append(found, pair)
			}
		}
	}
	slices.Sort(found)
	return found
}

// TestComposeNamesAreListed keeps the docs' table of the lines to change
// outside Compose equal to the names the files hold.
func TestComposeNamesAreListed(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]+)` \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(withoutComposeSection(t), -1) {
		listed = append(listed, m[1]+" "+m[2])
	}
	slices.Sort(listed)
	if found := composeNamesIn(t, repoRoot); !slices.Equal(listed, found) {
		t.Errorf("docs/prometheus.md lists the Compose names\n%s\nthe files hold\n%s",
			strings.Join(listed, "\n"), strings.Join(found, "\n"))
	}
}

// TestOneHostCommands runs the docs' commands for a one-host setup on a
// copy of the files: no Compose name may be left, and Prometheus's and
// Alertmanager's own checks must accept what they leave.
func TestOneHostCommands(t *testing.T) {
	t.Parallel()
	_, rest, ok := strings.Cut(withoutComposeSection(t), "\n```sh\n")
	if !ok {
		t.Fatal("the Without Docker Compose section has no sh block")
	}
	commands, _, _ := strings.Cut(rest, "\n```")
	root := t.TempDir()
	for _, file := range append(slices.Clone(composeNamed), "alerts.yml") {
		b := readFile(t, file)
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(file)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", commands)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the docs' commands: %v\n%s", err, out)
	}
	if left := composeNamesIn(t, root); len(left) > 0 {
		t.Errorf("after the docs' commands these Compose names are left:\n%s", strings.Join(left, "\n"))
	}
	for file, want := range map[string]string{
		composeNamed[0]: "- localhost:9877",
		composeNamed[1]: "url: http://localhost:9877/webhook",
		composeNamed[2]: "url: http://localhost:9090",
	} {
		if b, err := os.ReadFile(filepath.Join(root, file)); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s after the docs' commands lacks %q (%v)", file, want, err)
		}
	}
	promtool := testkit.NeedTool(t, "prometheus", "promtool")
	runTool(t, root, promtool, "check", "config", composeNamed[0])
	amtool := testkit.NeedTool(t, "prometheus-alertmanager", "amtool")
	runTool(t, root, amtool, "check-config", composeNamed[1])
}
