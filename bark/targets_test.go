package bark

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lavender-ml/lavender/internal/barktest"
)

func TestParseTargets(t *testing.T) {
	const key = "SECRETKEY123"
	tests := []struct {
		name    string
		content string
		lines   []int    // lines of the targets accepted
		tmpls   []string // their templates, level/isArchive appended
		errs    []string // the exact error lines, in order
	}{
		{
			name:    "comments, blanks, CRLF and a BOM",
			content: "\uFEFF# phone\r\n\r\n  https://api.day.app/" + key + "/$0  \r\n",
			lines:   []int{3},
			tmpls:   []string{"https://api.day.app/" + key + "/$0?level=passive&isArchive=0"},
		},
		{
			name:    "template with a query gets &",
			content: "https://bark.example/" + key + "/$0?group=train",
			lines:   []int{1},
			tmpls:   []string{"https://bark.example/" + key + "/$0?group=train&level=passive&isArchive=0"},
		},
		{
			name:    "template's own level and isArchive win",
			content: "http://bark.example:8080/" + key + "/$0?level=timeSensitive\nhttp://b.example/" + key + "/$0?isArchive=1\nhttp://c.example/" + key + "/$0?level=active&isArchive=1",
			lines:   []int{1, 2, 3},
			tmpls: []string{
				"http://bark.example:8080/" + key + "/$0?level=timeSensitive&isArchive=0",
				"http://b.example/" + key + "/$0?isArchive=1&level=passive",
				"http://c.example/" + key + "/$0?level=active&isArchive=1",
			},
		},
		{
			// bark-server lowercases query keys, the last one winning: an
			// appended level=passive would override the template's Level.
			name:    "template's own level and isArchive win however spelt",
			content: "http://a.example/" + key + "/$0?Level=active\nhttp://b.example/" + key + "/$0?ISARCHIVE=1&LEVEL=critical",
			lines:   []int{1, 2},
			tmpls: []string{
				"http://a.example/" + key + "/$0?Level=active&isArchive=0",
				"http://b.example/" + key + "/$0?ISARCHIVE=1&LEVEL=critical",
			},
		},
		{
			name:    "template ending in ? or &",
			content: "https://a.example/" + key + "/$0?\nhttps://a.example/" + key + "/$0?sound=bell&",
			lines:   []int{1, 2},
			tmpls: []string{
				"https://a.example/" + key + "/$0?level=passive&isArchive=0",
				"https://a.example/" + key + "/$0?sound=bell&level=passive&isArchive=0",
			},
		},
		{
			name:    "message in the query",
			content: "https://a.example/" + key + "?body=$0",
			lines:   []int{1},
			tmpls:   []string{"https://a.example/" + key + "?body=$0&level=passive&isArchive=0"},
		},
		{
			name: "every kind of bad line, named by file:line only",
			content: strings.Join([]string{
				"https://api.day.app/" + key + "/$0",
				"https://api.day.app/" + key + "/",
				"ftp://api.day.app/" + key + "/$0",
				"api.day.app/" + key + "/$0",
				"https:///" + key + "/$0",
				"https://api.day.app/" + key + "/$0#frag",
				"https://$0.day.app/" + key,
				"https://api.day.app/" + key + " /$0",
				"https://api.day.app/%zz" + key + "/$0",
				"mailto:" + key + "$0",
				"https://api.day.app/YOUR_DEVICE_KEY/$0",
			}, "\n"),
			lines: []int{1},
			tmpls: []string{"https://api.day.app/" + key + "/$0?level=passive&isArchive=0"},
			errs: []string{
				"x.bark.env:2: " + reasonNoPlaceholder,
				"x.bark.env:3: " + reasonScheme,
				"x.bark.env:4: " + reasonScheme,
				"x.bark.env:5: " + reasonNoHost,
				"x.bark.env:6: " + reasonFragment,
				"x.bark.env:7: " + reasonPlaceholderAt,
				"x.bark.env:8: " + reasonBadChars,
				"x.bark.env:9: " + reasonNotURL,
				"x.bark.env:10: " + reasonScheme,
				"x.bark.env:11: " + reasonNotConfigured,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := parseTargets("x.bark.env", []byte(tt.content))
			var lines []int
			var tmpls []string
			for _, tg := range ts {
				lines = append(lines, tg.Line)
				tmpls = append(tmpls, tg.tmpl)
				if tg.File != "x.bark.env" {
					t.Errorf("File = %q", tg.File)
				}
			}
			if fmt.Sprint(lines) != fmt.Sprint(tt.lines) {
				t.Errorf("lines = %v, want %v", lines, tt.lines)
			}
			if strings.Join(tmpls, "\n") != strings.Join(tt.tmpls, "\n") {
				t.Errorf("templates:\n%s\nwant:\n%s", strings.Join(tmpls, "\n"), strings.Join(tt.tmpls, "\n"))
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if want := strings.Join(tt.errs, "\n"); got != want {
				t.Errorf("errors:\n%s\nwant:\n%s", got, want)
			}
			if strings.Contains(got, key) {
				t.Errorf("error leaks the key: %s", got)
			}
		})
	}
}

func TestTargetNeverPrintsItsTemplate(t *testing.T) {
	ts, err := parseTargets("phone.bark.env", []byte("https://user:PASSWORD99@api.day.app/SECRETKEY123/$0"))
	if err != nil || len(ts) != 1 {
		t.Fatalf("parseTargets: %v, %d targets", err, len(ts))
	}
	tg := ts[0]
	for _, s := range []string{fmt.Sprint(tg), fmt.Sprintf("%+v", tg), fmt.Sprintf("%#v", tg), fmt.Sprintf("%v", []Target{tg}), tg.LogValue().String()} {
		if strings.Contains(s, "SECRETKEY123") || strings.Contains(s, "PASSWORD99") {
			t.Errorf("formatted target leaks the template: %s", s)
		}
		if !strings.Contains(s, "phone.bark.env:1") {
			t.Errorf("formatted target %q does not name file:line", s)
		}
	}
	if got := tg.scrub("device SECRETKEY123 and PASSWORD99 not found"); strings.Contains(got, "SECRETKEY123") || strings.Contains(got, "PASSWORD99") {
		t.Errorf("scrub left a secret: %s", got)
	}
}

// TestTargetAndNotifierFormatAsTheirName: every fmt verb and slog print
// a target, and its notifier, as file:line only. Without a Formatter, %d
// and %x would reach the fields, template and key included.
func TestTargetAndNotifierFormatAsTheirName(t *testing.T) {
	ts, err := parseTargets("phone.bark.env", []byte("https://user:PASSWORD99@api.day.app/SECRETKEY123/$0"))
	if err != nil || len(ts) != 1 {
		t.Fatalf("parseTargets: %v, %d targets", err, len(ts))
	}
	n := New(ts[0], nil, "")
	for _, tt := range []struct {
		value    any
		goString string
	}{
		{ts[0], "bark.Target(phone.bark.env:1)"},
		{n, "bark.Notifier(phone.bark.env:1)"},
	} {
		for _, verb := range []string{"%v", "%+v", "%s", "%d", "%x", "%X", "%q", "%#v"} {
			want := "phone.bark.env:1"
			if verb == "%#v" {
				want = tt.goString
			}
			if got := fmt.Sprintf(verb, tt.value); got != want {
				t.Errorf("%s of %T = %q, want %q", verb, tt.value, got, want)
			}
		}
		var log strings.Builder
		slog.New(slog.NewTextHandler(&log, nil)).Info("push", "target", tt.value)
		if got := log.String(); strings.Contains(got, "SECRETKEY123") || strings.Contains(got, "PASSWORD99") || !strings.Contains(got, "target=phone.bark.env:1") {
			t.Errorf("slog of %T: %s", tt.value, got)
		}
	}
}

func TestLoadTargets(t *testing.T) {
	dir := barktest.ConfigDir(t, map[string]string{
		"b.bark.env":   "https://api.day.app/KEYB/$0\n",
		".bark.env":    "# the example, copied\nhttps://api.day.app/KEYDOT/$0\n",
		"a.bark.env":   "https://api.day.app/KEYA1/$0\n\nhttps://api.day.app/KEYA2/$0\n",
		"notes.env":    "not a target\n",
		"x.bark.env.1": "not a target either\n",
	})
	if err := os.Mkdir(filepath.Join(dir, "dir.bark.env"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "open.bark.env"), []byte("https://api.day.app/KEYO/$0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "open.bark.env"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := LoadTargets(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := ".bark.env:2 a.bark.env:1 a.bark.env:3 b.bark.env:1 open.bark.env:1"
	if got := targetNames(res); got != want {
		t.Errorf("targets = %s, want %s", got, want)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "open.bark.env is readable by group or others (mode 0644)") {
		t.Errorf("warnings = %q", res.Warnings)
	}

	// One bad line fails the load and names every bad line.
	barktest.AddTargets(t, dir, map[string]string{"c.bark.env": "https://api.day.app/KEYC/\nhttp://x/KEYC2\n"})
	_, err = LoadTargets(dir)
	if err == nil || err.Error() != "c.bark.env:1: "+reasonNoPlaceholder+"\nc.bark.env:2: "+reasonNoPlaceholder {
		t.Errorf("err = %v", err)
	}

	if _, err := LoadTargets(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing config dir loaded")
	}
	empty, err := LoadTargets(t.TempDir())
	if err != nil || len(empty.Targets) != 0 {
		t.Errorf("empty dir: %v, %d targets", err, len(empty.Targets))
	}
}

// TestLoadTargetsSkipsWhatIsNoFile: a FIFO or a device under a target
// file's name is skipped at once, never read (a FIFO with no writer would
// hang a reload, /dev/zero would fill memory), and a symlink to a good
// file is followed, with the file's own mode judged.
func TestLoadTargetsSkipsWhatIsNoFile(t *testing.T) {
	dir := barktest.ConfigDir(t, map[string]string{"a.bark.env": "https://api.day.app/KEYA/$0\n"})
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.bark.env"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"zero.bark.env": "/dev/zero", "link.bark.env": "a.bark.env"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := LoadTargets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := targetNames(res); got != "a.bark.env:1 link.bark.env:1" {
		t.Errorf("targets = %s, want a.bark.env:1 link.bark.env:1", got)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings for a symlink to a 0600 file (a link's own mode is 0777): %q", res.Warnings)
	}
}

// targetNames lists the loaded targets by file:line, space-separated.
func targetNames(res LoadResult) string {
	var names []string
	for _, tg := range res.Targets {
		names = append(names, tg.Name())
	}
	return strings.Join(names, " ")
}

// TestLoadTargetsWarnsOfKeysInClear: a template that sends its device key
// over plain http to another host is warned about, encrypted or not (the
// key is in the URL either way); https and a server on loopback are not.
func TestLoadTargetsWarnsOfKeysInClear(t *testing.T) {
	dir := barktest.ConfigDir(t, map[string]string{
		"lan.bark.env": "http://bark.lan:8080/KEYA/$0\n" +
			"https://bark.lan/KEYB/$0\n" +
			"http://127.0.0.1:8080/KEYC/$0\n" +
			"BARK_ENCRYPTION=aes-128-cbc:0123456789abcdef\n" +
			"http://192.168.1.5/push?device_key=KEYD&body=$0\n",
	})
	res, err := LoadTargets(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"lan.bark.env:1 sends its device key over plain http to bark.lan:8080, where anyone on the way can read it; use https",
		"lan.bark.env:5 sends its device key over plain http to 192.168.1.5, where anyone on the way can read it; use https",
	}
	if got := strings.Join(res.Warnings, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	for _, w := range res.Warnings {
		if strings.Contains(w, "KEY") {
			t.Errorf("warning holds a device key: %s", w)
		}
	}
	if len(res.Targets) != 4 {
		t.Errorf("%d targets loaded, want all 4: a warning refuses nothing", len(res.Targets))
	}
}
