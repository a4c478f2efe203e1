package deploy

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// k8sObject is one parsed Kubernetes manifest and the file it came from.
type k8sObject struct {
	File string
	Doc  map[string]any
}

func (o k8sObject) kind() string { return digString(o.Doc, "kind") }
func (o k8sObject) name() string { return digString(o.Doc, "metadata", "name") }
func (o k8sObject) id() string   { return o.kind() + "/" + o.name() }

func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, e := range m {
		out[k] = toString(e)
	}
	return out
}

// subset reports whether every key of sel has the same value in labels.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false // an empty selector would select everything
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func loadKubernetes(t *testing.T) (objs []k8sObject, kustomization map[string]any) {
	t.Helper()
	dir := repoPath("deploy", "kubernetes")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		docs := decodeYAMLDocs(t, data, name)
		if name == "kustomization.yaml" {
			kustomization = docs[0]
			continue
		}
		for _, d := range docs {
			objs = append(objs, k8sObject{File: name, Doc: d})
		}
	}
	if kustomization == nil {
		t.Fatal("deploy/kubernetes has no kustomization.yaml")
	}
	return objs, kustomization
}

func TestKubernetesManifests(t *testing.T) {
	objs, kust := loadKubernetes(t)

	// kustomization.yaml lists exactly the manifests in the directory.
	var files []string
	seenFile := map[string]bool{}
	for _, o := range objs {
		if !seenFile[o.File] {
			seenFile[o.File] = true
			files = append(files, o.File)
		}
	}
	resources := stringList(dig(kust, "resources"))
	sort.Strings(files)
	sort.Strings(resources)
	if strings.Join(files, " ") != strings.Join(resources, " ") {
		t.Errorf("kustomization resources = %v, manifests in the directory = %v", resources, files)
	}
	ns := digString(kust, "namespace")

	byID := map[string]k8sObject{}
	for _, o := range objs {
		if digString(o.Doc, "apiVersion") == "" || o.kind() == "" || o.name() == "" {
			t.Errorf("%s: a document without apiVersion, kind or metadata.name", o.File)
			continue
		}
		if _, dup := byID[o.id()]; dup {
			t.Errorf("%s defined twice", o.id())
		}
		byID[o.id()] = o
		if o.kind() != "Namespace" {
			if got := digString(o.Doc, "metadata", "namespace"); got != ns {
				t.Errorf("%s: namespace %q, want %q", o.id(), got, ns)
			}
		}
	}
	for _, id := range []string{
		"Namespace/lavender", "DaemonSet/lavender-exporter", "Service/lavender-exporter",
		"Deployment/lavender-bridge", "Service/lavender-bridge", "ServiceMonitor/lavender",
		"PrometheusRule/lavender", "AlertmanagerConfig/lavender",
	} {
		if _, ok := byID[id]; !ok {
			t.Errorf("deploy/kubernetes lacks %s", id)
		}
	}

	// Workloads: selectors match their own pods, containers run the right
	// command as non-root with a read-only root, on a named http port.
	podLabels := map[string]map[string]string{}
	containerPorts := map[string]map[string]bool{}
	for id, want := range map[string]string{"DaemonSet/lavender-exporter": "exporter", "Deployment/lavender-bridge": "bridge"} {
		o, ok := byID[id]
		if !ok {
			continue
		}
		spec := dig(o.Doc, "spec", "template", "spec")
		labels := stringMap(dig(o.Doc, "spec", "template", "metadata", "labels"))
		if !subset(stringMap(dig(o.Doc, "spec", "selector", "matchLabels")), labels) {
			t.Errorf("%s: selector does not match its pod template labels %v", id, labels)
		}
		podLabels[id] = labels
		if dig(spec, "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s: pod securityContext lacks runAsNonRoot: true", id)
		}
		containers, _ := dig(spec, "containers").([]any)
		if len(containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", id, len(containers))
		}
		c := containers[0]
		args := stringList(dig(c, "args"))
		if len(args) == 0 || args[0] != want {
			t.Errorf("%s: args %v, want `lavender %s …`", id, args, want)
		}
		if digString(c, "image") != "lavender" {
			t.Errorf("%s: image %q, want \"lavender\" (kustomization.yaml sets the real one)", id, digString(c, "image"))
		}
		if dig(c, "securityContext", "readOnlyRootFilesystem") != true || dig(c, "securityContext", "allowPrivilegeEscalation") != false {
			t.Errorf("%s: container needs readOnlyRootFilesystem: true and allowPrivilegeEscalation: false", id)
		}
		ports := map[string]bool{}
		for _, p := range dig(c, "ports").([]any) {
			ports[digString(p, "name")] = true
			if n, _ := dig(p, "containerPort").(int); n != 9877 {
				t.Errorf("%s: containerPort %v, want lavender's 9877", id, dig(p, "containerPort"))
			}
		}
		containerPorts[id] = ports
		for _, probe := range []string{"readinessProbe", "livenessProbe"} {
			// An HTTP probe sends no credentials: with basic auth on, it
			// gets 401 and restarts a healthy pod.
			if dig(c, probe, "httpGet") != nil || !ports[digString(c, probe, "tcpSocket", "port")] {
				t.Errorf("%s: %s must be a tcpSocket probe of a port the container names", id, probe)
			}
		}
		for _, m := range dig(c, "volumeMounts").([]any) {
			found := false
			for _, v := range dig(spec, "volumes").([]any) {
				if digString(v, "name") == digString(m, "name") {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: volumeMount %s has no volume", id, digString(m, "name"))
			}
		}
	}
	if args := stringList(dig(byID["DaemonSet/lavender-exporter"].Doc, "spec", "template", "spec", "containers", "0", "args")); flagValue(args, "--path.procfs") != "/host/proc" {
		t.Errorf("exporter args %v: want --path.procfs=/host/proc (the node's /proc)", args)
	}
	if digString(byID["Deployment/lavender-bridge"].Doc, "spec", "strategy", "type") != "Recreate" ||
		dig(byID["Deployment/lavender-bridge"].Doc, "spec", "replicas") != 1 {
		t.Error("bridge must run as exactly one replica (Recreate): its storm limit is per process")
	}

	// Services select exactly their workload's pods, on a port it names.
	svcFor := map[string]string{"Service/lavender-exporter": "DaemonSet/lavender-exporter", "Service/lavender-bridge": "Deployment/lavender-bridge"}
	for svc, workload := range svcFor {
		o := byID[svc]
		sel := stringMap(dig(o.Doc, "spec", "selector"))
		for other, labels := range podLabels {
			if subset(sel, labels) != (other == workload) {
				t.Errorf("%s selects %s: %v", svc, other, subset(sel, labels))
			}
		}
		for _, p := range dig(o.Doc, "spec", "ports").([]any) {
			if !containerPorts[workload][digString(p, "targetPort")] {
				t.Errorf("%s: targetPort %q is not a port of %s", svc, digString(p, "targetPort"), workload)
			}
		}
	}

	// The ServiceMonitor scrapes both Services as job "lavender", the job
	// LavenderDown watches.
	sm := byID["ServiceMonitor/lavender"]
	smSel := stringMap(dig(sm.Doc, "spec", "selector", "matchLabels"))
	jobLabel := digString(sm.Doc, "spec", "jobLabel")
	smPort := digString(sm.Doc, "spec", "endpoints", "0", "port")
	for svc := range svcFor {
		labels := stringMap(dig(byID[svc].Doc, "metadata", "labels"))
		if !subset(smSel, labels) {
			t.Errorf("ServiceMonitor does not select %s", svc)
		}
		if labels[jobLabel] != "lavender" {
			t.Errorf("%s: label %s = %q, so its job would not be \"lavender\"", svc, jobLabel, labels[jobLabel])
		}
		named := false
		for _, p := range dig(byID[svc].Doc, "spec", "ports").([]any) {
			named = named || digString(p, "name") == smPort
		}
		if !named {
			t.Errorf("ServiceMonitor endpoint port %q is not a port of %s", smPort, svc)
		}
	}
	if digString(sm.Doc, "spec", "endpoints", "0", "interval") != "15s" {
		t.Error("ServiceMonitor interval differs from prometheus.yml's 15s, which alerts.yml's `for` durations assume")
	}

	// The AlertmanagerConfig mirrors alertmanager.yml and reaches the
	// bridge's Service.
	amc := byID["AlertmanagerConfig/lavender"]
	am := loadAlertmanagerConfig(t)
	bark := am.Route.Routes[0]
	route := dig(amc.Doc, "spec", "route")
	for field, want := range map[string]string{
		"groupWait": am.Route.GroupWait, "groupInterval": am.Route.GroupInterval, "repeatInterval": am.Route.RepeatInterval,
	} {
		got, err1 := time.ParseDuration(digString(route, field))
		w, err2 := time.ParseDuration(want)
		if err1 != nil || err2 != nil || got != w {
			t.Errorf("AlertmanagerConfig %s = %q, alertmanager.yml has %q", field, digString(route, field), want)
		}
	}
	if got, want := strings.Join(stringList(dig(route, "groupBy")), ","), strings.Join(am.Route.GroupBy, ","); got != want {
		t.Errorf("AlertmanagerConfig groupBy = %s, alertmanager.yml has %s", got, want)
	}
	matcher := fmt.Sprintf(`%s%s%q`, digString(route, "matchers", "0", "name"), digString(route, "matchers", "0", "matchType"), digString(route, "matchers", "0", "value"))
	if len(bark.Matchers) != 1 || matcher != bark.Matchers[0] {
		t.Errorf("AlertmanagerConfig matcher %s, alertmanager.yml has %v", matcher, bark.Matchers)
	}
	receiver := digString(route, "receiver")
	var hook any
	for _, r := range dig(amc.Doc, "spec", "receivers").([]any) {
		if digString(r, "name") == receiver {
			hook = dig(r, "webhookConfigs", "0")
		}
	}
	if hook == nil {
		t.Fatalf("AlertmanagerConfig route receiver %q has no webhook", receiver)
	}
	if dig(hook, "sendResolved") != true {
		t.Error("AlertmanagerConfig webhook lacks sendResolved: true")
	}
	u, err := url.Parse(digString(hook, "url"))
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(u.Host)
	bridge := byID["Service/lavender-bridge"]
	if want := bridge.name() + "." + ns + ".svc"; host != want {
		t.Errorf("AlertmanagerConfig webhook host %q, want the bridge Service %s", host, want)
	}
	if fmt.Sprint(dig(bridge.Doc, "spec", "ports", "0", "port")) != port || u.Path != "/webhook" {
		t.Errorf("AlertmanagerConfig webhook %s does not reach port %v /webhook of the bridge", u, dig(bridge.Doc, "spec", "ports", "0", "port"))
	}
}
