package ntfy

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lavender-ml/lavender/internal/ntfytest"
)

func TestParseTargets(t *testing.T) {
	dir := ntfytest.ConfigDir(t, map[string]string{
		"tok":       testToken + "\n",
		"empty":     " \n",
		"spaced":    "tk_a b\n",
		"pw":        "hunter2 two\n",
		"large":     strings.Repeat("x", maxSecretFileBytes+1),
		"ctrl.pass": "a\x00b",
	})
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LAVENDER_TEST_TOKEN", testToken)
	t.Setenv("LAVENDER_TEST_EMPTY", "")
	tests := []struct {
		name    string
		content string
		want    []string // each accepted target: server topic auth sequence title
		errs    []string // the exact error lines, in order
	}{
		{
			name:    "comments, blanks, CRLF and a BOM",
			content: "\uFEFF# phone\r\n\r\n  https://ntfy.sh/my-topic  \r\n",
			want:    []string{"https://ntfy.sh my-topic - auto -"},
		},
		{
			name: "every option",
			content: strings.Join([]string{
				"https://ntfy.example:8443/ntfy/alerts_1 token_file=tok sequence=on",
				"http://10.0.0.5/Alerts-2\ttoken_env=LAVENDER_TEST_TOKEN sequence=off title=\"GPU box 2\"",
				"https://ntfy.sh/x user=phil password_file=pw",
				"https://ntfy.sh/y user=phil password_env=LAVENDER_TEST_TOKEN title=box",
				"https://ntfy.sh/z token_file=" + filepath.Join(dir, "tok"),
			}, "\n"),
			want: []string{
				"https://ntfy.example:8443/ntfy alerts_1 token on -",
				"http://10.0.0.5 Alerts-2 token off GPU box 2",
				"https://ntfy.sh x basic auto -",
				"https://ntfy.sh y basic auto box",
				"https://ntfy.sh z token auto -",
			},
		},
		{
			name: "bad URLs, named by file:line only",
			content: strings.Join([]string{
				"https://ntfy.sh/ok",
				"ftp://ntfy.sh/topic",
				"ntfy.sh/topic",
				"https:///topic",
				"https://phil:" + testToken + "@ntfy.sh/topic",
				"https://" + testToken + "@ntfy.sh/topic",
				"https://ntfy.sh/topic?auth=" + testToken,
				"https://ntfy.sh/topic?AUTH=QmVhcmVy",
				"https://ntfy.sh/topic?priority=5",
				"https://ntfy.sh/topic#x",
				"https://ntfy.sh/",
				"https://ntfy.sh",
				"https://ntfy.sh/bad.topic",
				"https://ntfy.sh/" + strings.Repeat("a", 65),
				"https://ntfy.sh/%zz",
				"https://ntfy.sh/a\x01b",
				"https://ntfy.sh/topic title=\"open",
			}, "\n"),
			want: []string{"https://ntfy.sh ok - auto -"},
			errs: []string{
				"x.ntfy.env:2: " + reasonScheme,
				"x.ntfy.env:3: " + reasonScheme,
				"x.ntfy.env:4: " + reasonNoHost,
				"x.ntfy.env:5: " + reasonUserinfo,
				"x.ntfy.env:6: " + reasonUserinfo,
				"x.ntfy.env:7: " + reasonAuthQuery,
				"x.ntfy.env:8: " + reasonAuthQuery,
				"x.ntfy.env:9: " + reasonQuery,
				"x.ntfy.env:10: " + reasonFragment,
				"x.ntfy.env:11: " + reasonNoTopic,
				"x.ntfy.env:12: " + reasonNoTopic,
				"x.ntfy.env:13: " + reasonTopic,
				"x.ntfy.env:14: " + reasonTopic,
				"x.ntfy.env:15: " + reasonNotURL,
				"x.ntfy.env:16: " + reasonBadChars,
				"x.ntfy.env:17: the line " + reasonQuote,
			},
		},
		{
			name: "bad options and credentials",
			content: strings.Join([]string{
				"https://ntfy.sh/t token=" + testToken,
				"https://ntfy.sh/t auth=" + testToken,
				"https://ntfy.sh/t user=phil password=" + testToken,
				"https://ntfy.sh/t " + testToken,
				"https://ntfy.sh/t " + testToken + "=x",
				"https://ntfy.sh/t sequence=on sequence=off",
				"https://ntfy.sh/t sequence=maybe",
				"https://ntfy.sh/t title=",
				"https://ntfy.sh/t token_file=missing",
				"https://ntfy.sh/t token_file=empty",
				"https://ntfy.sh/t token_file=spaced",
				"https://ntfy.sh/t token_file=large",
				"https://ntfy.sh/t token_file=adir",
				"https://ntfy.sh/t token_file=" + testToken,
				"https://ntfy.sh/t token_file=",
				"https://ntfy.sh/t token_env=LAVENDER_TEST_UNSET_VAR",
				"https://ntfy.sh/t token_env=LAVENDER_TEST_EMPTY",
				"https://ntfy.sh/t token_env=" + testToken,
				"https://ntfy.sh/t token_env=1BAD",
				"https://ntfy.sh/t token_file=tok token_env=LAVENDER_TEST_TOKEN",
				"https://ntfy.sh/t token_file=tok user=phil password_file=pw",
				"https://ntfy.sh/t user=phil",
				"https://ntfy.sh/t password_file=pw",
				"https://ntfy.sh/t user=ph:il password_file=pw",
				"https://ntfy.sh/t user=phil password_file=ctrl.pass",
				"https://ntfy.sh/t user=phil password_file=pw password_env=LAVENDER_TEST_TOKEN",
			}, "\n"),
			errs: []string{
				"x.ntfy.env:1: " + reasonInlineToken,
				"x.ntfy.env:2: " + reasonInlineToken,
				"x.ntfy.env:3: " + reasonInlinePass,
				"x.ntfy.env:4: option 1 " + reasonNotOption,
				"x.ntfy.env:5: option 1 " + reasonUnknown,
				"x.ntfy.env:6: sequence " + reasonRepeated,
				"x.ntfy.env:7: " + reasonSequence,
				"x.ntfy.env:8: " + reasonTitle,
				"x.ntfy.env:9: token_file: " + reasonFileMissing,
				"x.ntfy.env:10: token_file: the secret " + reasonEmptySecret,
				"x.ntfy.env:11: token_file: the secret " + reasonSecretChars,
				"x.ntfy.env:12: token_file: " + reasonFileTooLarge,
				"x.ntfy.env:13: token_file " + reasonFileNotFile,
				"x.ntfy.env:14: token_file " + reasonSecretInPlace,
				"x.ntfy.env:15: token_file " + reasonEmptySecret,
				"x.ntfy.env:16: token_env " + reasonEnvUnset,
				"x.ntfy.env:17: token_env: the secret " + reasonEmptySecret,
				"x.ntfy.env:18: token_env " + reasonSecretInPlace,
				"x.ntfy.env:19: token_env " + reasonEnvName,
				"x.ntfy.env:20: " + reasonTwoSources,
				"x.ntfy.env:21: " + reasonTwoAuths,
				"x.ntfy.env:22: " + reasonUserNoPass,
				"x.ntfy.env:23: " + reasonPassNoUser,
				"x.ntfy.env:24: " + reasonUserChars,
				"x.ntfy.env:25: password_file: the secret " + reasonSecretChars,
				"x.ntfy.env:26: " + reasonTwoSources,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := parseTargets(dir, "x.ntfy.env", []byte(tt.content))
			var got []string
			for _, tg := range ts {
				auth, title := tg.authKind, tg.title
				if auth == "" {
					auth = "-"
				}
				if title == "" {
					title = "-"
				}
				got = append(got, strings.Join([]string{tg.server, tg.topic, auth, tg.sequence, title}, " "))
				if tg.File != "x.ntfy.env" || tg.Identity() == "" {
					t.Errorf("File %q Identity %q", tg.File, tg.Identity())
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("targets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if want := strings.Join(tt.errs, "\n"); gotErr != want {
				t.Errorf("errors:\n%s\nwant:\n%s", gotErr, want)
			}
			for _, secret := range []string{testToken, "hunter2", "QmVhcmVy"} {
				if strings.Contains(gotErr, secret) {
					t.Errorf("an error leaks %q: %s", secret, gotErr)
				}
			}
		})
	}
}

// TestIdentity: the identity follows server, topic and where the
// credential comes from, never the credential: a rotated token keeps it.
func TestIdentity(t *testing.T) {
	dir := ntfytest.ConfigDir(t, map[string]string{"tok": testToken, "tok2": testToken})
	id := func(line string) string {
		ts, err := parseTargets(dir, "x.ntfy.env", []byte(line))
		if err != nil || len(ts) != 1 {
			t.Fatalf("%s: %v", line, err)
		}
		return ts[0].Identity()
	}
	base := id("https://ntfy.sh/t token_file=tok")
	if id("https://ntfy.sh/t token_file=tok sequence=off title=x") != base {
		t.Error("options other than the credential's source changed the identity")
	}
	ntfytest.AddFiles(t, dir, map[string]string{"tok": "tk_rotatedrotatedrotatedrotated1"})
	if id("https://ntfy.sh/t token_file=tok") != base {
		t.Error("a rotated token changed the identity")
	}
	for _, line := range []string{"https://ntfy.sh/u token_file=tok", "https://ntfy.example/t token_file=tok", "https://ntfy.sh/t token_file=tok2", "https://ntfy.sh/t"} {
		if id(line) == base {
			t.Errorf("%s has the identity of https://ntfy.sh/t token_file=tok", line)
		}
	}
}

func TestLoadTargets(t *testing.T) {
	dir := ntfytest.ConfigDir(t, map[string]string{
		"b.ntfy.env":   "https://ntfy.sh/b token_file=b.token\n",
		"b.token":      testToken,
		".ntfy.env":    "# the example, copied\nhttps://ntfy.sh/dot\n",
		"a.ntfy.env":   "https://ntfy.sh/a1\n\nhttps://ntfy.sh/a2\n",
		"notes.env":    "not a target\n",
		"x.ntfy.env.1": "not a target either\n",
	})
	if err := os.Mkdir(filepath.Join(dir, "dir.ntfy.env"), 0o700); err != nil {
		t.Fatal(err)
	}
	// An open topic in a world-readable file is no secret; a token file
	// and a file naming a credential are warned about.
	for name, content := range map[string]string{"open.ntfy.env": "https://ntfy.sh/open\n", "shared.ntfy.env": "https://ntfy.sh/s token_file=shared.token\n", "shared.token": testToken} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := LoadTargets(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := ".ntfy.env:2 a.ntfy.env:1 a.ntfy.env:3 b.ntfy.env:1 open.ntfy.env:1 shared.ntfy.env:1"
	if got := targetNames(res); got != want {
		t.Errorf("targets = %s, want %s", got, want)
	}
	wantWarn := []string{
		"shared.ntfy.env is readable by group or others (mode 0644) but its topics are private; run chmod 600 on it",
		"the token_file of a target in shared.ntfy.env is readable by group or others (mode 0644); run chmod 600 on it",
	}
	if strings.Join(res.Warnings, "\n") != strings.Join(wantWarn, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(res.Warnings, "\n"), strings.Join(wantWarn, "\n"))
	}
	if got := strings.Join(res.Report(), "|"); !strings.Contains(got, "b.ntfy.env:1 ok (ntfy.sh, topic b, token, sequence auto)") || !strings.Contains(got, "open.ntfy.env:1 ok (ntfy.sh, topic open, no auth, sequence auto)") {
		t.Errorf("report = %s", got)
	}

	// One bad line fails the load, names every bad line, and keeps the good.
	ntfytest.AddFiles(t, dir, map[string]string{"c.ntfy.env": "https://ntfy.sh/c?auth=x\nhttps://ntfy.sh/c2 token_file=nope\n"})
	res, err = LoadTargets(dir)
	if err == nil || err.Error() != "c.ntfy.env:1: "+reasonAuthQuery+"\nc.ntfy.env:2: token_file: "+reasonFileMissing {
		t.Errorf("err = %v", err)
	}
	if len(res.Targets) != 6 || len(res.Bad) != 2 {
		t.Errorf("%d targets, %d bad", len(res.Targets), len(res.Bad))
	}

	var de *ConfigDirError
	if _, err := LoadTargets(filepath.Join(dir, "missing")); err == nil || !errorsAs(err, &de) {
		t.Errorf("a missing config dir: %v", err)
	}
	if _, err := LoadTargets(filepath.Join(dir, "b.token")); err == nil || !errorsAs(err, &de) {
		t.Errorf("a file as config dir: %v", err)
	}
	empty, err := LoadTargets(t.TempDir())
	if err != nil || len(empty.Targets) != 0 {
		t.Errorf("empty dir: %v, %d targets", err, len(empty.Targets))
	}
}

// TestReloadPicksUpARotatedToken: the token is read at load time, so a
// reload after a rotation sends the new one.
func TestReloadPicksUpARotatedToken(t *testing.T) {
	const rotated = "tk_rotatedrotatedrotatedrotated1"
	srv := ntfytest.New(t)
	srv.RequireToken(testToken)
	dir := ntfytest.ConfigDir(t, map[string]string{"p.ntfy.env": srv.TopicURL("t") + " token_file=tok", "tok": testToken})
	res, err := LoadTargets(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustPush(t, New(res.Targets[0], nil, ""), notifyText("one"))
	srv.RequireToken(rotated)
	ntfytest.AddFiles(t, dir, map[string]string{"tok": rotated + "\n"})
	if _, err := push(t, New(res.Targets[0], nil, ""), relaxedTimeout, notifyText("stale")); err == nil || err.Error() != "HTTP 401" {
		t.Errorf("the old target after rotation: %v, want HTTP 401", err)
	}
	res, err = LoadTargets(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustPush(t, New(res.Targets[0], nil, ""), notifyText("two"))
	ps := srv.Publishes()
	if ps[0].Token != testToken || ps[2].Token != rotated {
		t.Errorf("tokens sent: %q, %q", ps[0].Token, ps[2].Token)
	}
}

// TestLoadTargetsSkipsWhatIsNoFile: a FIFO or a device under a target
// file's name is skipped at once, never read, and a symlink to a good file
// is followed; a token file that is a FIFO is refused, not waited on.
func TestLoadTargetsSkipsWhatIsNoFile(t *testing.T) {
	dir := ntfytest.ConfigDir(t, map[string]string{"a.ntfy.env": "https://ntfy.sh/a\n"})
	for _, name := range []string{"fifo.ntfy.env", "fifo.token"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"zero.ntfy.env": "/dev/zero", "link.ntfy.env": "a.ntfy.env"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	ntfytest.AddFiles(t, dir, map[string]string{"f.ntfy.env": "https://ntfy.sh/f token_file=fifo.token\nhttps://ntfy.sh/z token_file=/dev/zero\n"})
	res, err := LoadTargets(dir)
	if got := targetNames(res); got != "a.ntfy.env:1 link.ntfy.env:1" {
		t.Errorf("targets = %s", got)
	}
	if err == nil || err.Error() != "f.ntfy.env:1: token_file "+reasonFileNotFile+"\nf.ntfy.env:2: token_file "+reasonFileNotFile {
		t.Errorf("err = %v", err)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings: %q", res.Warnings)
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

func TestTargetFormatsAsItsName(t *testing.T) {
	dir := ntfytest.ConfigDir(t, map[string]string{"tok": testToken})
	ts, err := parseTargets(dir, "phone.ntfy.env", []byte("https://ntfy.sh/t token_file=tok"))
	if err != nil || len(ts) != 1 {
		t.Fatal(err)
	}
	for verb, want := range map[string]string{"%v": "phone.ntfy.env:1", "%+v": "phone.ntfy.env:1", "%s": "phone.ntfy.env:1", "%#v": "ntfy.Target(phone.ntfy.env:1)", "%d": "phone.ntfy.env:1", "%x": "phone.ntfy.env:1"} {
		if got := fmt.Sprintf(verb, ts[0]); got != want {
			t.Errorf("%s = %q, want %q", verb, got, want)
		}
	}
	// The notifier holds the token too.
	n := New(ts[0], nil, "")
	for verb, want := range map[string]string{"%v": "phone.ntfy.env:1", "%+v": "phone.ntfy.env:1", "%#v": "ntfy.Notifier(phone.ntfy.env:1)", "%d": "phone.ntfy.env:1", "%x": "phone.ntfy.env:1"} {
		if got := fmt.Sprintf(verb, n); got != want {
			t.Errorf("notifier %s = %q, want %q", verb, got, want)
		}
	}
	var log strings.Builder
	slog.New(slog.NewTextHandler(&log, nil)).Info("push", "target", ts[0], "notifier", n)
	if got := log.String(); strings.Contains(got, testToken) || !strings.Contains(got, "target=phone.ntfy.env:1 notifier=phone.ntfy.env:1") {
		t.Errorf("slog: %s", got)
	}
}

// TestShippedExampleIsNotConfigured: `cp .ntfy.env.example phone.ntfy.env`
// without editing it loads no target (a public topic every copy shares),
// and says what to replace.
func TestShippedExampleIsNotConfigured(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", ".ntfy.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := parseTargets(t.TempDir(), "phone.ntfy.env", data)
	if len(ts) != 0 || err == nil || err.Error() != "phone.ntfy.env:7: not configured: replace YOUR_TOPIC with a topic of your own" {
		t.Errorf("targets %v, error %v", ts, err)
	}
}

// TestLoadTargetsWarnsOfCredentialsInClear: a token or password sent over
// plain http to another host is warned about; an open topic, https and a
// server on loopback are not.
func TestLoadTargetsWarnsOfCredentialsInClear(t *testing.T) {
	t.Setenv("LAVENDER_TEST_PASSWORD", "correct horse battery")
	dir := ntfytest.ConfigDir(t, map[string]string{
		"lan.ntfy.env": "http://ntfy.lan/a token_file=tok\n" +
			"http://ntfy.lan:8080/b user=phil password_env=LAVENDER_TEST_PASSWORD\n" +
			"http://ntfy.lan/open\n" +
			"https://ntfy.lan/c token_file=tok\n" +
			"http://127.0.0.1:2586/d token_file=tok\n" +
			"http://localhost:2586/e token_file=tok\n",
		"tok": testToken + "\n",
	})
	res, err := LoadTargets(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"lan.ntfy.env:1 sends its access token over plain http to ntfy.lan, where anyone on the way can read it; use https",
		"lan.ntfy.env:2 sends its password over plain http to ntfy.lan:8080, where anyone on the way can read it; use https",
	}
	if got := strings.Join(res.Warnings, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if len(res.Targets) != 6 {
		t.Errorf("%d targets loaded, want all 6: a warning refuses nothing", len(res.Targets))
	}
}
