package deploy

import (
	"slices"
	"testing"
)

// TestDeployReadsTheKernelLog: the compose file and the DaemonSet hand
// lavender /dev/kmsg and CAP_SYSLOG, so GPU and storage faults are seen
// where they are deployed (the systemd unit is TestSystemdUnitHardening's).
func TestDeployReadsTheKernelLog(t *testing.T) {
	c := loadCompose(t)
	if d := stringList(dig(c, "services", "lavender", "devices")); !slices.Contains(d, "/dev/kmsg:/dev/kmsg:r") {
		t.Errorf("compose lavender devices = %q, want /dev/kmsg read-only", d)
	}
	if caps := stringList(dig(c, "services", "lavender", "cap_add")); !slices.Contains(caps, "SYSLOG") {
		t.Errorf("compose lavender cap_add = %q, want SYSLOG", caps)
	}
	if drop := stringList(dig(c, "services", "lavender", "cap_drop")); !slices.Equal(drop, []string{"ALL"}) {
		t.Errorf("compose lavender cap_drop = %q, want ALL", drop)
	}

	objs, _ := loadKubernetes(t)
	found := false
	for _, o := range objs {
		if o.id() != "DaemonSet/lavender-exporter" {
			continue
		}
		found = true
		spec := dig(o.Doc, "spec", "template", "spec")
		volumes := map[string]string{}
		for _, v := range dig(spec, "volumes").([]any) {
			volumes[digString(v, "name")] = digString(v, "hostPath", "path") + " " + digString(v, "hostPath", "type")
		}
		for _, ctr := range dig(spec, "containers").([]any) {
			if !slices.Contains(stringList(dig(ctr, "args")), "--path.kmsg=/dev/kmsg") {
				t.Errorf("exporter args lack --path.kmsg=/dev/kmsg")
			}
			if add := stringList(dig(ctr, "securityContext", "capabilities", "add")); !slices.Contains(add, "SYSLOG") {
				t.Errorf("exporter capabilities add = %q, want SYSLOG", add)
			}
			if dig(ctr, "securityContext", "allowPrivilegeEscalation") != false {
				t.Error("exporter may escalate privileges")
			}
			mounted := false
			for _, m := range dig(ctr, "volumeMounts").([]any) {
				if digString(m, "mountPath") == "/dev/kmsg" && dig(m, "readOnly") == true && volumes[digString(m, "name")] == "/dev/kmsg CharDevice" {
					mounted = true
				}
			}
			if !mounted {
				t.Errorf("exporter does not mount the node's /dev/kmsg read-only (volumes %v)", volumes)
			}
		}
	}
	if !found {
		t.Fatal("no DaemonSet/lavender-exporter")
	}
}
