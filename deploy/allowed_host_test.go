package deploy

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// allowedHosts are a command line's --web.allowed-host values.
func allowedHosts(args []string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--web.allowed-host="); ok {
			out = append(out, strings.ToLower(v))
		}
	}
	return out
}

// nameAllowed reports whether lavender, run with args, takes writes
// without credentials sent to host: IP literals and localhost always, any
// other name only through --web.allowed-host.
func nameAllowed(args []string, host string) bool {
	if _, err := netip.ParseAddr(host); err == nil || host == "localhost" {
		return true
	}
	return slices.Contains(allowedHosts(args), strings.ToLower(host))
}

// TestDeployWritersNameAllowedHosts: lavender refuses writes without
// credentials whose Host is a name it was not told about (a web page could
// have rebound that name to it), so each deploy flavour must allow the name
// its Alertmanager posts the webhook to: the compose service name, the
// bridge's Service name in Kubernetes.
func TestDeployWritersNameAllowedHosts(t *testing.T) {
	t.Run("compose", func(t *testing.T) {
		args := stringList(dig(loadCompose(t), "services", "lavender", "command"))
		u, err := url.Parse(loadAlertmanagerConfig(t).barkURL(t))
		if err != nil {
			t.Fatal(err)
		}
		if !nameAllowed(args, u.Hostname()) {
			t.Errorf("alertmanager.yml posts to %s, but lavender's --web.allowed-host %q leaves %q out", u, allowedHosts(args), u.Hostname())
		}
	})
	t.Run("kubernetes", func(t *testing.T) {
		objs, _ := loadKubernetes(t)
		var bridgeArgs []string
		var hooks []string
		for _, o := range objs {
			for _, c := range asList(dig(o.Doc, "spec", "template", "spec", "containers")) {
				if args := stringList(dig(c, "args")); len(args) > 0 && args[0] == "bridge" {
					bridgeArgs = args
				}
			}
			if o.kind() == "AlertmanagerConfig" {
				for _, r := range asList(dig(o.Doc, "spec", "receivers")) {
					for _, h := range asList(dig(r, "webhookConfigs")) {
						hooks = append(hooks, digString(h, "url"))
					}
				}
			}
		}
		if bridgeArgs == nil || len(hooks) == 0 {
			t.Fatalf("found bridge args %q and webhooks %q, want both", bridgeArgs, hooks)
		}
		for _, hook := range hooks {
			u, err := url.Parse(hook)
			if err != nil {
				t.Fatal(err)
			}
			if !nameAllowed(bridgeArgs, u.Hostname()) {
				t.Errorf("the AlertmanagerConfig posts to %s, but the bridge's --web.allowed-host %q leaves %q out", u, allowedHosts(bridgeArgs), u.Hostname())
			}
		}
	})
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
