package delivery

import (
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/notify"
)

// TestSendConcurrentToAllTargets: `send` pushes to every target at once,
// each within its timeout, and reports each by file:line in the targets'
// order: a hanging target neither delays nor hides the others.
func TestSendConcurrentToAllTargets(t *testing.T) {
	a, b := barktest.New(t, "KA"), barktest.New(t, "KB")
	b.SetFault(barktest.Hang())
	dir := barktest.ConfigDir(t, map[string]string{
		"a.bark.env": a.Template("KA"),
		"b.bark.env": b.Template("KB") + "\n" + barktest.DownURL(t) + "/KC/$0",
	})
	loaded, err := LoadTargets(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// a must answer within the timeout: a 200ms bound could flake on a loaded machine.
	res := SendEach(t.Context(), loaded.Notifiers, time.Second, func(notify.Notifier) notify.Message { return notify.Message{Text: "hi"} })
	var got []string
	for _, r := range res {
		got = append(got, r.String())
	}
	want := "a.bark.env:1 ok|b.bark.env:1 failed: timeout|b.bark.env:2 failed: connection refused"
	if strings.Join(got, "|") != want {
		t.Errorf("results = %q, want %q", strings.Join(got, "|"), want)
	}
	if len(a.Pushes()) != 1 {
		t.Errorf("a got %d pushes", len(a.Pushes()))
	}
}

func TestResultExplain(t *testing.T) {
	for _, tt := range []struct {
		r    Result
		want string
	}{
		{Result{Target: "phone.bark.env:1"}, "phone.bark.env:1 ok"},
		{Result{Target: "phone.bark.env:1", Err: &notify.Error{Class: "HTTP 400"}}, "phone.bark.env:1 failed: HTTP 400"},
		{Result{Target: "phone.ntfy.env:2", Err: &notify.Error{Class: "redirect", Saw: "302 to https://example.com/login"}},
			"phone.ntfy.env:2 failed: redirect (saw 302 to https://example.com/login)"},
	} {
		if got := tt.r.Explain(); got != tt.want {
			t.Errorf("Explain() = %q, want %q", got, tt.want)
		}
	}
}
