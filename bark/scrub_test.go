package bark

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/notify"
)

// TestScrubHandler: whatever reaches the logger (a message, a string, an
// error, a group, pre-set attributes) leaves it without the keys of the
// loaded targets, APNs device tokens or invisible format characters.
func TestScrubHandler(t *testing.T) {
	const key = "SCRUBKEY0123456789"
	dir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": "https://bark.example/" + key + "/$0?sound=" + key + "x\n"})
	if _, err := LoadTargets(dir); err != nil {
		t.Fatal(err)
	}
	var buf testkit.SyncBuffer
	logger := slog.New(notify.NewScrubHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), Scrub))
	token := "/3/device/" + apnsTestToken
	logger.With("preset", "GET /"+key+"/x").WithGroup("g").Warn(
		`Unsolicited response received on idle HTTP channel starting with "HTTP/1.1 400 you sent /`+key+`/hello"`,
		"err", errors.New("Post https://api.push.apple.com"+token+": EOF"),
		"detail", "device "+token,
		"nested", slog.GroupValue(slog.String("k", key+"x")),
		"name", "exe.\u202Egnp",
		"n", 3,
	)
	got := buf.String()
	for _, leak := range []string{key, apnsTestToken, "\u202E"} {
		if strings.Contains(got, leak) {
			t.Errorf("log holds %q:\n%s", leak, got)
		}
	}
	for _, want := range []string{"you sent /<redacted>/hello", "/3/device/<redacted>: EOF", "preset=\"GET /<redacted>/x\"", "g.nested.k=<redacted>", "g.name=exe.gnp", "g.n=3"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}

// TestAPNsTokenNeverLogged: bark-server's 500 answer quotes the APNs device
// token, and the failure's detail, which the bridge logs at debug level,
// holds it redacted.
func TestAPNsTokenNeverLogged(t *testing.T) {
	srv := barktest.New(t, "KEY")
	srv.SetFault(apnsRefused())
	res := sendAll(t, map[string]string{"phone.bark.env": srv.Template("KEY")}, relaxedTimeout, nil, "hello")
	if len(res) != 1 || res[0].Err == nil || res[0].Err.Error() != "HTTP 500" {
		t.Fatalf("results = %v", res)
	}
	var pe *PushError
	if !errors.As(res[0].Err, &pe) || !strings.Contains(pe.Detail, `/3/device/<redacted>`) || strings.Contains(pe.Detail, apnsTestToken) {
		t.Errorf("detail %#v", res[0].Err)
	}
}
