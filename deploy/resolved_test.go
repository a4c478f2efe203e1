package deploy

import (
	"testing"
)

// TestResolutionsReachThePhone: the shipped Alertmanager configs send
// resolutions (send_resolved: true), so every shipped lavender that takes
// their webhook must push them (--bark.send-resolved); without it the
// bridge only counts a resolution, and the phone keeps showing an incident
// that is long over.
func TestResolutionsReachThePhone(t *testing.T) {
	am := loadAlertmanagerConfig(t)
	for _, r := range am.Receivers {
		for _, w := range r.WebhookConfigs {
			if r.Name == "bark" && (w.SendResolved == nil || !*w.SendResolved) {
				t.Fatal("alertmanager.yml's bark webhook no longer sends resolutions; update this test")
			}
		}
	}
	objs, _ := loadKubernetes(t)
	for _, o := range objs {
		if o.kind() == "AlertmanagerConfig" {
			receivers, _ := dig(o.Doc, "spec", "receivers").([]any)
			for _, r := range receivers {
				hooks, _ := dig(r, "webhookConfigs").([]any)
				for _, h := range hooks {
					if dig(h, "sendResolved") != true {
						t.Fatalf("%s %s no longer sends resolutions; update this test", o.File, o.id())
					}
				}
			}
		}
	}

	receivers := map[string][]string{}
	for name, args := range serveCommands(t) {
		if name != "Dockerfile CMD" { // the image's default, which compose and Kubernetes replace
			receivers[name] = args
		}
	}
	for _, o := range objs {
		containers, _ := dig(o.Doc, "spec", "template", "spec", "containers").([]any)
		for _, c := range containers {
			if args := stringList(dig(c, "args")); len(args) > 0 && args[0] == "bridge" {
				receivers[o.File+" "+o.id()+" "+digString(c, "name")] = args
			}
		}
	}
	if len(receivers) < 3 {
		t.Fatalf("found %d shipped webhook receivers (%v), want compose, systemd and the Kubernetes bridge", len(receivers), receivers)
	}
	for name, args := range receivers {
		if !hasFlag(args, "--bark.send-resolved") {
			t.Errorf("%s: lavender %v lacks --bark.send-resolved, so the resolutions Alertmanager sends never reach the phone", name, args)
		}
	}
}
