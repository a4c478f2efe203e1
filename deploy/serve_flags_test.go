package deploy

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// serveCommands returns, per deploy flavour, the command line of every
// process the deploy files start with `lavender serve` (without the binary).
// Each flavour that is known to run serve must be found, so that a changed
// file layout fails the tests rather than leaving nothing to check.
func serveCommands(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}

	// docker-compose.yml: every service whose command starts with serve.
	services, _ := dig(loadCompose(t), "services").(map[string]any)
	for name := range services {
		if cmd := stringList(dig(services, name, "command")); len(cmd) > 0 && cmd[0] == "serve" {
			out["docker-compose.yml "+name] = cmd
		}
	}

	// Dockerfile: the image's default command.
	cmdLine := regexp.MustCompile(`(?m)^CMD\s+(\[.*\])\s*$`).FindSubmatch(readFile(t, "deploy", "Dockerfile"))
	if cmdLine == nil {
		t.Fatal("deploy/Dockerfile has no CMD [\"…\"] line")
	}
	var cmd []string
	if err := json.Unmarshal(cmdLine[1], &cmd); err != nil {
		t.Fatalf("deploy/Dockerfile CMD %s: %v", cmdLine[1], err)
	}
	if len(cmd) > 0 && cmd[0] == "serve" {
		out["Dockerfile CMD"] = cmd
	}

	// systemd: ExecStart with its continuation lines.
	unit := strings.ReplaceAll(string(readFile(t, "deploy", "systemd", "lavender.service")), "\\\n", " ")
	for _, line := range strings.Split(unit, "\n") {
		if rest, ok := strings.CutPrefix(line, "ExecStart="); ok {
			if fields := strings.Fields(rest); len(fields) > 1 && fields[1] == "serve" {
				out["lavender.service"] = fields[1:]
			}
		}
	}

	// Kubernetes: every container whose args start with serve.
	objs, _ := loadKubernetes(t)
	for _, o := range objs {
		containers, _ := dig(o.Doc, "spec", "template", "spec", "containers").([]any)
		for _, c := range containers {
			if args := stringList(dig(c, "args")); len(args) > 0 && args[0] == "serve" {
				out[o.File+" "+o.id()+" "+digString(c, "name")] = args
			}
		}
	}

	for _, want := range []string{"docker-compose.yml lavender", "Dockerfile CMD", "lavender.service"} {
		if out[want] == nil {
			t.Fatalf("found no `lavender serve` in %s; update this test", want)
		}
	}
	return out
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// TestEveryServeResumes: a deploy flavour that restarts serve (systemd's
// Restart=, compose's restart: unless-stopped, a container restarted by its
// engine) must go on with the current run and its phase table; without
// --run.resume each restart starts a new run and forgets running phases,
// so PhaseStalled can never fire for them.
func TestEveryServeResumes(t *testing.T) {
	for where, args := range serveCommands(t) {
		if !hasFlag(args, "--run.resume") || flagValue(args, "--run.resume") == "false" {
			t.Errorf("%s runs %q without --run.resume: a restart would drop the running phases", where, args)
		}
	}
}
