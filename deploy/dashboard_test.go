package deploy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"
)

// dashboard is the part of Grafana's dashboard JSON the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Query    any    `json:"query"`
			AllValue string `json:"allValue"`
			Current  struct {
				Value any `json:"value"`
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *dsRef         `json:"datasource"`
	Targets    []target       `json:"targets"`
	Panels     []panel        `json:"panels"` // rows that are collapsed hold theirs here
	FieldConf  fieldConf      `json:"fieldConfig"`
	GridPos    map[string]int `json:"gridPos"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	RefID      string `json:"refId"`
	Expr       string `json:"expr"`
	Datasource *dsRef `json:"datasource"`
}

type fieldConf struct {
	Defaults struct {
		Unit       string `json:"unit"`
		Thresholds struct {
			Steps []struct {
				Color string   `json:"color"`
				Value *float64 `json:"value"`
			} `json:"steps"`
		} `json:"thresholds"`
		Custom struct {
			ThresholdsStyle struct {
				Mode string `json:"mode"`
			} `json:"thresholdsStyle"`
		} `json:"custom"`
	} `json:"defaults"`
}

// panelExpr is one PromQL expression of the dashboard and where it sits.
type panelExpr struct {
	Panel string
	RefID string
	Expr  string // as stored, with Grafana variables
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data := readFile(t, "deploy", "grafana", "dashboards", "lavender.json")
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("parse lavender.json: %v", err)
	}
	return d
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// dashboardExprs returns every PromQL expression in the dashboard. The
// end-to-end test runs each one, after expandGrafanaVars, against a real
// Prometheus.
func dashboardExprs(t *testing.T) []panelExpr {
	t.Helper()
	var out []panelExpr
	for _, p := range allPanels(loadDashboard(t).Panels) {
		for _, tg := range p.Targets {
			out = append(out, panelExpr{Panel: p.Title, RefID: tg.RefID, Expr: tg.Expr})
		}
	}
	if len(out) == 0 {
		t.Fatal("lavender.json has no expressions")
	}
	return out
}

// expandGrafanaVars replaces the dashboard's variables the way Grafana would
// for job "lavender" and all instances, so the expression can go straight
// to Prometheus's HTTP API.
func expandGrafanaVars(expr, rateInterval string) string {
	return strings.NewReplacer(
		"$__rate_interval", rateInterval,
		"$job", "lavender",
		"$instance", ".*",
	).Replace(expr)
}

func TestExpandGrafanaVars(t *testing.T) {
	got := expandGrafanaVars(`rate(lavender_swap_in_bytes_total{job="$job",instance=~"$instance"}[$__rate_interval])`, "1m")
	want := `rate(lavender_swap_in_bytes_total{job="lavender",instance=~".*"}[1m])`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q: both must be set for provisioning", d.UID, d.Title)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range []string{"datasource", "job", "instance"} {
		if !vars[v] {
			t.Errorf("dashboard lacks the %q variable", v)
		}
	}

	panels := allPanels(d.Panels)
	byTitle := map[string]panel{}
	ids := map[int]string{}
	for _, p := range panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if _, dup := byTitle[p.Title]; dup {
			t.Errorf("two panels titled %q", p.Title)
		}
		byTitle[p.Title] = p
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		for _, tg := range p.Targets {
			// A datasource bound to one Grafana's uid breaks on import into
			// another; the variable works everywhere.
			for _, ds := range []*dsRef{p.Datasource, tg.Datasource} {
				if ds == nil || ds.UID != "${datasource}" {
					t.Errorf("panel %q target %s: datasource %+v, want uid ${datasource}", p.Title, tg.RefID, ds)
				}
			}
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s has no expr", p.Title, tg.RefID)
			}
			if bad := unknownMetrics(tg.Expr); len(bad) > 0 {
				t.Errorf("panel %q uses metrics lavender does not export: %v", p.Title, bad)
			}
			if !strings.Contains(tg.Expr, `job="$job"`) || !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q target %s ignores the job/instance variables: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
	}

	// The panels docs/prometheus.md lists, each identified by the series it must
	// show and the panel type that shows it.
	required := []struct {
		title, typ string
		exprHas    []string
	}{
		{"Swap used", "timeseries", []string{"lavender_swap_used_ratio"}},
		{"Swap bytes", "timeseries", []string{"lavender_swap_used_bytes", "lavender_swap_total_bytes"}},
		{"Swap in/out rate", "timeseries", []string{"rate(lavender_swap_in_bytes_total", "rate(lavender_swap_out_bytes_total"}},
		{"Memory pressure", "timeseries", []string{"rate(lavender_pressure_memory_waiting_seconds_total", "rate(lavender_pressure_memory_stalled_seconds_total"}},
		{"OOM kills", "timeseries", []string{"increase(lavender_oom_kills_total"}},
		{"Active phases", "state-timeline", []string{"lavender_phase_active"}},
		{"Phase durations", "", []string{"lavender_phase_duration_seconds"}},
		{"Heartbeat age of active phases", "timeseries", []string{"time() - lavender_phase_last_heartbeat_timestamp_seconds", "lavender_phase_active"}},
		{"Phase progress", "table", []string{"lavender_phase_step", "lavender_phase_total_steps", "lavender_phase_eta_seconds",
			"time() - lavender_phase_last_progress_timestamp_seconds"}},
		{"Bark pushes ok/failed", "", []string{"lavender_bark_pushes_total", "result"}},
		{"Webhook requests by status code", "", []string{"lavender_webhook_requests_total", "code"}},
		{"GPU faults", "timeseries", []string{"increase(lavender_gpu_xid_errors_total", "increase(lavender_gpu_fallen_off_bus_total"}},
		{"Storage errors", "timeseries", []string{"increase(lavender_storage_errors_total"}},
		{"Kernel log readable", "stat", []string{"lavender_kernel_log_readable"}},
		{"Training loss", "timeseries", []string{"lavender_phase_loss"}},
		{"Disk space free", "timeseries", []string{"lavender_disk_avail_bytes", "lavender_disk_size_bytes"}},
		{"Disk inodes free", "timeseries", []string{"lavender_disk_files_free", "lavender_disk_files"}},
		{"Unreadable disks", "stat", []string{"lavender_disk_error"}},
	}
	for _, r := range required {
		p, ok := byTitle[r.title]
		if !ok {
			t.Errorf("required panel %q missing", r.title)
			continue
		}
		if r.typ != "" && p.Type != r.typ {
			t.Errorf("panel %q is a %s, want %s", r.title, p.Type, r.typ)
		}
		var all []string
		for _, tg := range p.Targets {
			all = append(all, tg.Expr)
		}
		joined := strings.Join(all, "\n")
		for _, s := range r.exprHas {
			if !strings.Contains(joined, s) {
				t.Errorf("panel %q: no expression contains %q", r.title, s)
			}
		}
	}

	// Threshold lines drawn where the alerts fire.
	for title, value := range map[string]float64{
		"Swap used":                      0.5,
		"Swap in/out rate":               1048576,
		"Memory pressure":                0.1, // MemoryPressureHigh
		"Heartbeat age of active phases": 600,
		"Disk space free":                0.05, // --watchdog.disk-min-free's default
		"Disk inodes free":               0.05,
	} {
		p := byTitle[title]
		if mode := p.FieldConf.Defaults.Custom.ThresholdsStyle.Mode; !strings.Contains(mode, "line") {
			t.Errorf("panel %q draws no threshold line (thresholdsStyle %q)", title, mode)
		}
		found := false
		for _, s := range p.FieldConf.Defaults.Thresholds.Steps {
			if s.Value != nil && *s.Value == value {
				found = true
			}
		}
		if !found {
			t.Errorf("panel %q has no threshold step at %v", title, value)
		}
	}
	for _, title := range []string{"Swap used", "Memory pressure", "Disk space free", "Disk inodes free"} {
		if u := byTitle[title].FieldConf.Defaults.Unit; u != "percentunit" {
			t.Errorf("%s unit = %q, want percentunit (0–1 shown as %%)", title, u)
		}
	}
}

// TestGrafanaProvisioning checks that the provisioning files point where
// docker-compose.yml mounts the dashboard, and at the datasource uid the
// dashboard's variable defaults to.
func TestGrafanaProvisioning(t *testing.T) {
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name      string         `yaml:"name"`
			UID       string         `yaml:"uid"`
			Type      string         `yaml:"type"`
			Access    string         `yaml:"access"`
			URL       string         `yaml:"url"`
			IsDefault bool           `yaml:"isDefault"`
			Editable  bool           `yaml:"editable"`
			JSONData  map[string]any `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	decodeYAML(t, readFile(t, "deploy", "grafana", "provisioning", "datasources", "lavender.yml"), &ds, "datasources/lavender.yml")
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" {
		t.Fatalf("datasource provisioning = %+v, want one prometheus datasource, apiVersion 1", ds)
	}
	uid := ds.Datasources[0].UID

	d := loadDashboard(t)
	for _, v := range d.Templating.List {
		if v.Name == "datasource" {
			if v.Type != "datasource" || v.Query != "prometheus" {
				t.Errorf("datasource variable is %s/%v, want a prometheus datasource variable", v.Type, v.Query)
			}
			if v.Current.Value != uid {
				t.Errorf("datasource variable defaults to %v, want the provisioned uid %q", v.Current.Value, uid)
			}
		}
	}

	var dash struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name                  string `yaml:"name"`
			Folder                string `yaml:"folder"`
			Type                  string `yaml:"type"`
			DisableDeletion       bool   `yaml:"disableDeletion"`
			AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
			UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
			Options               struct {
				Path                      string `yaml:"path"`
				FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	decodeYAML(t, readFile(t, "deploy", "grafana", "provisioning", "dashboards", "lavender.yml"), &dash, "dashboards/lavender.yml")
	if len(dash.Providers) != 1 || dash.Providers[0].Type != "file" {
		t.Fatalf("dashboard provisioning = %+v, want one file provider", dash)
	}
	mounts := composeMounts(t, "grafana")
	if src := mounts[dash.Providers[0].Options.Path]; src != "./grafana/dashboards" {
		t.Errorf("docker-compose.yml mounts %q at the provider path %s, want ./grafana/dashboards", src, dash.Providers[0].Options.Path)
	}
}

func marshalYAML(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(fmt.Errorf("marshal: %w", err))
	}
	return b
}
