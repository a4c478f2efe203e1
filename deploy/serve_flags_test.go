package deploy

import (
	"encoding/json"
	"net/netip"
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

// writeAllow is the union of a command line's --web.write-allow values, or
// lavender's default (this host only) when there are none. "host" counts
// as loopback: the host's other addresses are the machine's, not the
// file's.
func writeAllow(t *testing.T, where string, args []string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--web.write-allow="); ok {
			if v == "host" {
				out = append(out, loopback...)
				continue
			}
			p, err := netip.ParsePrefix(v)
			if err != nil {
				t.Fatalf("%s: --web.write-allow=%s: %v", where, v, err)
			}
			out = append(out, p)
		}
	}
	if out == nil {
		out = loopback
	}
	return out
}

func covers(allow []netip.Prefix, p netip.Prefix) bool {
	for _, a := range allow {
		if a.Bits() <= p.Bits() && a.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// TestDeployWriteAllow: lavender takes writes from its own host only unless
// told otherwise, so each deploy flavour must allow the
// networks its writers come from: in compose, Alertmanager and the host's
// training code on the compose network (the host arrives through the
// network's gateway); in Kubernetes, Alertmanager's and the training pods'
// pod network; under systemd, Alertmanager and training on the same host.
func TestDeployWriteAllow(t *testing.T) {
	t.Run("compose", func(t *testing.T) {
		c := loadCompose(t)
		args := stringList(dig(c, "services", "lavender", "command"))
		allow := writeAllow(t, "compose", args)
		configs, _ := dig(c, "networks", "default", "ipam", "config").([]any)
		if len(configs) == 0 {
			t.Fatal("docker-compose.yml gives the default network no fixed subnet, so --web.write-allow cannot name it")
		}
		for _, cfg := range configs {
			subnet, err := netip.ParsePrefix(digString(cfg, "subnet"))
			if err != nil {
				t.Fatalf("default network subnet: %v", err)
			}
			if !covers(allow, subnet) {
				t.Errorf("lavender's --web.write-allow %v does not cover the compose network %s that Alertmanager posts from", allow, subnet)
			}
		}
		for _, svc := range []string{"lavender", "alertmanager"} {
			if nets := dig(c, "services", svc, "networks"); nets != nil {
				t.Errorf("service %s names its own networks (%v); it must stay on the default network lavender allows", svc, nets)
			}
		}
	})
	t.Run("kubernetes", func(t *testing.T) {
		objs, _ := loadKubernetes(t)
		found := 0
		for _, o := range objs {
			containers, _ := dig(o.Doc, "spec", "template", "spec", "containers").([]any)
			for _, c := range containers {
				args := stringList(dig(c, "args"))
				if len(args) == 0 || (args[0] != "exporter" && args[0] != "bridge" && args[0] != "serve") {
					continue
				}
				found++
				allow := writeAllow(t, o.id(), args)
				// Common pod CIDRs: kubeadm with flannel, k3s, Calico.
				for _, podCIDR := range []string{"10.244.0.0/16", "10.42.0.0/16", "192.168.0.0/16"} {
					if !covers(allow, netip.MustParsePrefix(podCIDR)) {
						t.Errorf("%s: --web.write-allow %v leaves out the pod network %s its writers post from", o.id(), allow, podCIDR)
					}
				}
			}
		}
		if found < 2 {
			t.Fatalf("found %d lavender containers in deploy/kubernetes, want the exporter and the bridge", found)
		}
	})
	t.Run("systemd", func(t *testing.T) {
		args := serveCommands(t)["lavender.service"]
		if allow := writeAllow(t, "lavender.service", args); !covers(allow, netip.MustParsePrefix("127.0.0.1/32")) {
			t.Errorf("lavender.service: --web.write-allow %v leaves out this host, where Alertmanager and training run", allow)
		}
	})
}
