package bark

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestTemplateParamsAsBarkServerReadsThem(t *testing.T) {
	for _, tc := range []struct {
		tmpl string
		want map[string]string
	}{
		{"https://api.day.app/KEY/$0", map[string]string{}},
		{"https://api.day.app/KEY/$0?", map[string]string{}},
		{"https://api.day.app/KEY/$0?Level=active", map[string]string{"level": "active"}},
		{"https://api.day.app/KEY/$0?GROUP=x", map[string]string{"group": "x"}},
		{"https://api.day.app/KEY/$0?isarchive=1", map[string]string{"isarchive": "1"}},
		{"https://api.day.app/KEY/$0?Level=active&level=critical", map[string]string{"level": "critical"}},
		{"https://api.day.app/KEY/$0?level=critical&LEVEL=active", map[string]string{"level": "active"}},
		{"https://api.day.app/KEY/$0?group=my+lab&url=https%3A%2F%2Fx%2Fy", map[string]string{"group": "my lab", "url": "https://x/y"}},
		{"https://api.day.app/KEY/$0?%49d=abc", map[string]string{"id": "abc"}}, // an escaped key is still the key
		{"https://api.day.app/KEY/$0?delete", map[string]string{"delete": ""}},
		{"https://api.day.app/KEY/$0?group=100%&&sound=x", map[string]string{"group": "100%", "sound": "x"}},
		{"https://bark.example/KEY?body=$0&Group=a=b", map[string]string{"body": "$0", "group": "a=b"}},
	} {
		if got := templateParams(tc.tmpl); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("templateParams(%q) = %v, want %v", tc.tmpl, got, tc.want)
		}
	}
}

func TestAppendMissingParams(t *testing.T) {
	ours := []queryParam{
		{"id", "3f9a0c1d2e4b5a69"},
		{"group", "gpu-7:9100"},
		{"url", "https://lavender.example/status?host=gpu 7"},
		{"level", "passive"},
		{"isArchive", "0"},
	}
	const all = "id=3f9a0c1d2e4b5a69&group=gpu-7%3A9100&url=https%3A%2F%2Flavender.example%2Fstatus%3Fhost%3Dgpu%207&level=passive&isArchive=0"
	for _, tc := range []struct{ tmpl, want string }{
		{"https://api.day.app/KEY/$0", "https://api.day.app/KEY/$0?" + all},
		{"https://api.day.app/KEY/$0?", "https://api.day.app/KEY/$0?" + all},
		{"https://api.day.app/KEY/$0?sound=x&", "https://api.day.app/KEY/$0?sound=x&" + all},
		// An "&" in the path is not a query separator (found by FuzzBarkEnv).
		{"https://api.day.app/KEY/$0&", "https://api.day.app/KEY/$0&?" + all},
		{"https://api.day.app/KEY/$0??", "https://api.day.app/KEY/$0??&" + all},
		{"https://api.day.app/KEY/$0?Level=active",
			"https://api.day.app/KEY/$0?Level=active&id=3f9a0c1d2e4b5a69&group=gpu-7%3A9100&url=https%3A%2F%2Flavender.example%2Fstatus%3Fhost%3Dgpu%207&isArchive=0"},
		{"https://api.day.app/KEY/$0?GROUP=x&ISARCHIVE=1&Id=mine&URL=u",
			"https://api.day.app/KEY/$0?GROUP=x&ISARCHIVE=1&Id=mine&URL=u&level=passive"},
		{"https://api.day.app/KEY/$0?group=a&level=b&isArchive=1&id=c&url=d", "https://api.day.app/KEY/$0?group=a&level=b&isArchive=1&id=c&url=d"},
	} {
		got := appendMissingParams(tc.tmpl, ours...)
		if got != tc.want {
			t.Errorf("appendMissingParams(%q)\n got %s\nwant %s", tc.tmpl, got, tc.want)
		}
		// What bark-server will read: the template's own values win, and
		// ours fill in the rest.
		own := templateParams(tc.tmpl)
		read := templateParams(got)
		for _, p := range ours {
			k := strings.ToLower(p.Key)
			want := p.Value
			if v, ok := own[k]; ok {
				want = v
			}
			if read[k] != want {
				t.Errorf("%s: bark-server would read %s=%q, want %q", tc.tmpl, k, read[k], want)
			}
		}
		if _, err := url.Parse(got); err != nil {
			t.Errorf("%s: result is not a URL: %v", got, err)
		}
	}
	if got := appendMissingParams("https://h/K/$0", queryParam{"level", "passive"}, queryParam{"Level", "active"}); got != "https://h/K/$0?level=passive" {
		t.Errorf("a key given twice: %s", got)
	}
}

func TestTemplateSets(t *testing.T) {
	set := templateSets("https://api.day.app/KEY/$0?Level=active&GROUP=x&isArchive=1")
	for _, k := range []string{"level", "group", "isarchive"} {
		if !set[k] {
			t.Errorf("templateSets misses %s: %v", k, set)
		}
	}
	if set["id"] || set["url"] || set["delete"] || len(set) != 3 {
		t.Errorf("templateSets = %v", set)
	}
}

// TestSummaryParams: the URL of a clear summary holds no id.
func TestSummaryParams(t *testing.T) {
	p := Push{Text: "x"}
	if got := params(p); len(got) != 0 {
		t.Errorf("params %v", got)
	}
	u, err := url.Parse(fillMessage(appendMissingParams("https://h/K/$0", params(Push{ID: "1", Group: "g", URL: "https://x/"})...), "m"))
	if err != nil || u.Query().Get("id") != "1" || u.Query().Get("group") != "g" || u.Query().Get("url") != "https://x/" {
		t.Errorf("%v %v", u, err)
	}
}
